package nixl

import "log/slog"

// Backend is one transport an agent can use. Implementations live in
// subpackages (backend/local, backend/tcp, backend/ucx) and are injected as
// BackendFactory values.
type Backend interface {
	// Name is the backend's identifier ("tcp", "ucx", ...): in
	// Config.Preference, and in metadata unless it has a WireName.
	Name() string
	// Address is this agent's address on the backend, published in
	// metadata for peers' Connect.
	Address() []byte
	// RegisterMemory prepares mem for remote access and returns the key
	// peers need for it (nil if the backend needs none).
	RegisterMemory(id RegionID, mem []byte) (key []byte, err error)
	// DeregisterMemory undoes RegisterMemory; the agent calls it only after
	// all accesses to the region have ended.
	DeregisterMemory(id RegionID) error
	// Connect opens a connection to a peer (lazily is fine).
	Connect(peer PeerInfo) (Conn, error)
	// Close releases everything; posted transfers fail with ErrClosed.
	Close() error
}

// WireNamer is a backend whose metadata name (its wire name) differs from
// its Name: the version of its protocol. Agents use a backend with a peer
// only when both advertise the same wire name, so two versions of a
// protocol never meet (during a rolling upgrade they fall to the next
// backend both have); its region keys are published under it too.
type WireNamer interface {
	WireName() string
}

// wireName is b's name in metadata.
func wireName(b Backend) string {
	if w, ok := b.(WireNamer); ok {
		return w.WireName()
	}
	return b.Name()
}

// BackendFactory builds a backend for one agent.
type BackendFactory func(env Env) (Backend, error)

// Env is what an agent gives its backends.
type Env struct {
	Agent  string // local agent name
	Logger *slog.Logger
	// Regions serves remote accesses to local memory (targets of the
	// backends that are not one-sided in hardware: tcp, local).
	Regions RegionAccess
	// Notify delivers a notification received from peer "from". It copies
	// msg, so a backend may reuse the buffer once it returns.
	Notify func(from string, msg []byte)
	// Lost is called, once, by a Failer backend that has stopped working
	// for good (Failed is non-nil from then on).
	Lost func(err error)
}

// Failer is a backend that can stop working for good while its agent
// lives: the UCX backend whose UCX runs in a child process that died. The
// agent then neither advertises a failed backend nor connects over it, so
// its own next transfers, and peers' once they load its fresh metadata,
// fall to the next backend both sides have.
type Failer interface {
	Failed() error
}

// failed reports whether b has failed for good.
func failed(b Backend) bool {
	f, ok := b.(Failer)
	return ok && f.Failed() != nil
}

// RegionAccess lends a registered region's bytes to a backend. Acquire
// checks the range and holds the region registered until release is called.
type RegionAccess interface {
	Acquire(id RegionID, off, n uint64) (mem []byte, release func(), err error)
}

// PeerInfo is what a backend needs to reach a peer.
type PeerInfo struct {
	Name    string
	Address []byte // the peer's address for this backend
}

// Conn is a backend connection to one peer.
type Conn interface {
	// Post starts req and returns at once. The backend calls req.Done
	// exactly once, after which it no longer touches the local buffers.
	Post(req *Request)
	// Close fails outstanding requests with ErrPeerGone.
	Close() error
}

// Request is a validated transfer handed to a backend.
type Request struct {
	Op    Op
	Pairs []Pair
	Notif []byte
	// Canceled is closed when the caller cancels; backends stop issuing
	// work and finish with ErrCanceled.
	Canceled <-chan struct{}
	Done     func(err error)
}

// Pair is one local buffer and the remote range it maps to.
type Pair struct {
	Local []byte
	// LocalRegion is the registered region Local lies in (held for the
	// transfer): a backend that registers regions uses that registration,
	// not another one that happens to cover the same bytes and may be
	// deregistered meanwhile.
	LocalRegion RegionID
	Remote      RemoteDesc
}

// RemoteDesc addresses remote memory; Key is the backend's key for the
// region from the peer's metadata.
type RemoteDesc struct {
	Region RegionID
	Offset uint64
	Key    []byte
}

// IsCanceled reports whether req has been canceled.
func (r *Request) IsCanceled() bool {
	select {
	case <-r.Canceled:
		return true
	default:
		return false
	}
}
