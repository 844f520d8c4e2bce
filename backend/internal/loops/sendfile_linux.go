//go:build !sendfile_raw

package loops

// rawSendfile is false: Sys.Sendfile goes through the runtime (see there).
const rawSendfile = false
