package guest

import (
	"io"
	"net"
	"sync"
)

// proxy copies both ways and half-closes each side as its source ends, so
// protocols that shut down writing first (HTTP/1.0 clients, rsync) work.
func proxy(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyHalf(a, b) }()
	go func() { defer wg.Done(); copyHalf(b, a) }()
	wg.Wait()
	a.Close()
	b.Close()
}

func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	// yamux streams have no CloseWrite: Close sends FIN and still lets the
	// other direction be read. Plain conns without half-close just close.
	dst.Close()
	if err != nil {
		src.Close()
	}
}
