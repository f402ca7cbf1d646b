// Package diskspace reports the free space of the file system that holds a
// directory (statfs), for the master's disk guard.
package diskspace

// Dir probes the file system of one directory. Its zero value is not
// usable; Path must be set.
type Dir struct {
	Path string
}
