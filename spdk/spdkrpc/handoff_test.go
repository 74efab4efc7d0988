package spdkrpc

import "testing"

// A call whose context ends just as the reading is handed to it (handOff
// took it out of pending and sent it the role; its wait saw ctx end
// first) passes the role on, and its request, written whole, stays owed
// its reply: when SPDK's reply comes it is dropped, and the connection
// keeps working for the others. Taking that reply for one to a request
// never sent failed a healthy connection under a cancellation storm.
func TestCallHandedReadingAsItsContextEndsStaysOwedItsReply(t *testing.T) {
	cn, server := pipeConn(t)
	ch2 := waitFor(cn, 2) // call 2: written, waiting for its reply
	cn.mu.Lock()
	cn.reading = true // another call reads, and is about to leave
	cn.mu.Unlock()
	cn.handOff() // the role goes to call 2 ...
	cn.mu.Lock()
	_, still := cn.pending[2]
	cn.mu.Unlock()
	if still {
		t.Fatal("handOff did not hand the reading to call 2")
	}
	cn.leave(2, ch2) // ... whose context ended as it was handed over

	cn.mu.Lock()
	reading := cn.reading
	w, owed := cn.pending[2]
	cn.mu.Unlock()
	if reading {
		t.Fatal("the reading was not passed on: nobody waits, so it must be free")
	}
	if !owed || w.ch != nil || w.state != reqWritten {
		t.Fatalf("call 2's request is not kept owed its reply (in pending: %v, %+v)", owed, w)
	}

	reader := readerFor(cn)
	go func() {
		_, _ = server.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":"late"}{"jsonrpc":"2.0","id":1,"result":true}`))
	}()
	if err := outcome(t, reader); err != nil {
		t.Fatalf("reader: %v, want its reply (the late reply to call 2 dropped)", err)
	}
	if err := cn.failure(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}
	cn.mu.Lock()
	_, owed = cn.pending[2]
	n := cn.abandoned
	cn.mu.Unlock()
	if owed || n != 0 {
		t.Fatalf("after its reply, call 2 still owed (%v), %d abandoned, want none", owed, n)
	}
}
