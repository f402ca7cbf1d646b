// Package fdlimit reads and raises the process's limit on open files
// (RLIMIT_NOFILE), which bounds how many connections the API can hold.
package fdlimit

// Limit is the open-file limit: Soft is in force, Hard is as far as the
// process may raise it.
type Limit struct {
	Soft, Hard uint64
}
