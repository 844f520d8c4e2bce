//go:build sendfile_raw

package loops

// rawSendfile is true in the comparison build of scripts/cold-sendfile.sh:
// Sys.Sendfile is a raw call, unknown to the runtime.
const rawSendfile = true
