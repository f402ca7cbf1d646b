//go:build unix

package httpdelivery

import (
	"net"
	"syscall"
)

// connAlive reports whether a kept connection can take a request: the
// consumer has not closed it and sent nothing unasked. net/http's read
// goroutine notices both while the connection is idle; the direct path
// looks once, when it takes the connection.
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			// Nothing to read: open and quiet. A byte, the end of
			// the stream or an error: not to be used.
			alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
			return true
		}
	})
	return err == nil && alive
}
