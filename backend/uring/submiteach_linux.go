package uring

import "github.com/pawelgaczynski/giouring"

// submitEach is loop.queued with Backend.SubmitEach (--uring-batch=off),
// an ablation: each SQE enters the kernel as soon as it is queued, a
// linked chain once, whole, at its last SQE, instead of all of a pass's
// at its one io_uring_enter.
func (l *loop) submitEach(e *giouring.SubmissionQueueEntry) {
	if e.Flags&(giouring.SqeIOLink|giouring.SqeIOHardlink) == 0 {
		l.submit()
	}
}
