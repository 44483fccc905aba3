package nixltest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// PeerProcess is an agent in another process: the test binary run again
// as a bare agent (TestMain runs it when it sees the environment it was
// given), which prints its metadata as one hex line and serves until its
// stdin closes or it is killed.
type PeerProcess struct {
	Cmd      *exec.Cmd
	Metadata []byte
	stdin    io.WriteCloser
}

// StartPeer runs the test binary with env added to its environment, under
// prefix (a command such as taskset, or nil), and reads the metadata line.
// The process is stopped at cleanup.
func StartPeer(tb testing.TB, prefix []string, env ...string) *PeerProcess {
	tb.Helper()
	argv := append(append([]string(nil), prefix...), os.Args[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &PeerProcess{Cmd: cmd, stdin: stdin}
	tb.Cleanup(p.Stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("peer metadata: %v", err)
	}
	if p.Metadata, err = hex.DecodeString(strings.TrimSpace(line)); err != nil {
		tb.Fatalf("peer metadata: %v", err)
	}
	return p
}

// Stop closes the peer's stdin, kills it and reaps it; later calls do
// nothing.
func (p *PeerProcess) Stop() {
	if p.stdin == nil {
		return
	}
	_ = p.stdin.Close()
	p.stdin = nil
	_ = p.Cmd.Process.Kill()
	_ = p.Cmd.Wait()
}

// ServePeer is the peer's side of StartPeer: it prints md as one hex
// line and returns when stdin closes.
func ServePeer(md []byte) {
	fmt.Println(hex.EncodeToString(md))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// Children lists the running processes (not zombies) whose parent is
// pid, from /proc (Linux).
func Children(tb testing.TB, pid int) map[int]bool {
	tb.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	parent, out := strconv.Itoa(pid), map[int]bool{}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, ppid, ok := procStat(child); ok && state != "Z" && ppid == parent {
			out[child] = true
		}
	}
	return out
}

// Alive reports whether pid is running (neither gone nor a zombie).
func Alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z"
}

// procStat is pid's state and parent from /proc/<pid>/stat ("pid (comm)
// state ppid ...", where comm may hold spaces and parentheses).
func procStat(pid int) (state, ppid string, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 2 {
		return "", "", false
	}
	return f[0], f[1], true
}
