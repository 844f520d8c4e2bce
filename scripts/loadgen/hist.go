package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear histogram of durations, HdrHistogram's layout with
// 7 bits of sub-bucket: values under 256 ns are exact, and every other
// value falls in a bucket narrower than 1/128 of it (0.8%). It covers
// up to 2^40 ns (18 minutes); longer values count in the last bucket.
// It is not safe for concurrent use: the generator is one thread.
type hist struct {
	counts [histBuckets]int64
	n      int64
	max    time.Duration
}

const (
	subBits     = 7
	maxShift    = 40 - (subBits + 1)
	histBuckets = (maxShift+1)<<subBits + 1<<subBits
)

// bucket is the index of the bucket that holds v ns (v >= 0).
func bucket(v int64) int {
	if v < 1<<(subBits+1) {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	if shift > maxShift {
		return histBuckets - 1
	}
	return shift<<subBits + int(v>>shift)
}

// upper is the largest value bucket i holds, in ns.
func upper(i int) int64 {
	if i < 1<<(subBits+1) {
		return int64(i)
	}
	shift := i>>subBits - 1
	sub := int64(i - shift<<subBits)
	return (sub+1)<<shift - 1
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucket(int64(d))]++
	h.n++
	h.max = max(h.max, d)
}

// quantile is the value at rank ceil(q × count) (nearest rank), as the
// upper end of its bucket: a percentile is never understated by more
// than the bucket's width, and never reported above the largest value
// recorded. 0 when the histogram is empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(1, min(int64(math.Ceil(q*float64(h.n))), h.n))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return min(time.Duration(upper(i)), h.max)
		}
	}
	return h.max
}

// writeTo writes the histogram's non-empty buckets, one "upper_ns,count"
// line each in rising order after a header line, the largest value
// recorded as the last bucket's upper end: the whole distribution, which
// the lab keeps beside the quantiles (labrun's latency.csv).
func (h *hist) writeTo(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "upper_ns,count")
	for i, c := range h.counts {
		if c > 0 {
			fmt.Fprintf(bw, "%d,%d\n", min(upper(i), int64(h.max)), c)
		}
	}
	return bw.Flush()
}
