// Package nixl moves KV-cache bytes between workers for disaggregated
// prefill/decode, modelled on NVIDIA NIXL.
//
// Each worker runs one Agent. The agent registers memory regions (slices
// outside the Go heap, see package arena), publishes a metadata blob with
// its backend addresses and region keys, and loads peers' blobs on demand.
// A transfer is a list of (local region, offset, length) ↔ (remote region,
// offset, length) pairs, read or written one-sidedly against a remote agent;
// Post returns at once with an Xfer handle, and an optional notification is
// delivered to the remote agent after every byte has landed.
//
// Invariants:
//   - Post validates what it can locally (region ids, ranges, lengths) and
//     returns those errors at once; everything that can only fail remotely
//     (peer gone, remote rejection) is reported on the handle. Nothing in
//     this package panics or blocks forever on peer behaviour: every wait
//     takes a context.
//   - A region is never deregistered while a transfer or a remote access
//     uses it: DeregisterMemory waits for them, so the caller may unmap
//     memory as soon as it returns.
//   - The agent holds no globals. Backends are injected as factories, and
//     the in-process backend finds peers through a registry value the caller
//     passes in, so any number of agents can live in one test process.
//
// Storage (files, objects) is registered as segments with RegisterStorage
// and served by StorageBackend implementations (segment.go): a transfer
// to storage names the agent itself as its peer, moves bytes between the
// agent's memory and its storage, and never involves another agent.
//
// Backends implement the Backend and Conn interfaces in backend.go; the
// agent picks one per peer from what both sides advertise, in the order of
// Config.Preference (ucx, tcp, local by default). A backend that fails for
// good while the agent runs (a Failer: the UCX backend whose child process
// died) is dropped from the agent's metadata and choices, and the agent
// calls Config.OnChange so that its owner re-publishes its endpoints.
package nixl
