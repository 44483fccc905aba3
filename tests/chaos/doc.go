// Package chaos breaks a running Switchyard mesh on purpose and counts
// what the clients lose. The stack is the operators' one, all real
// processes on loopback: two frontends, two routers, a prefill worker,
// decode workers, the kvbm-controller and the planner, with a Consul agent
// for discovery and a redis-server for router snapshots and the
// frontends' shared limits. A load generator in the test process plays
// the clients behind a load balancer; faults (SIGKILL and restart,
// SIGSTOP of Consul or Redis, a network partition through a TCP proxy)
// come one at a time under that load, and after each recovery every
// router's KV index is compared with what each worker holds.
//
// The invariants: a greedy request's text equals the undisturbed run's;
// the loss of any one router, worker, control-plane process, Consul or
// Redis fails no request; a lost frontend breaks only the connections it
// held, and the client's retry on the other frontend serves them; and
// the routers' indexes agree with the workers once the fault is over.
// See docs/chaos.md.
package chaos
