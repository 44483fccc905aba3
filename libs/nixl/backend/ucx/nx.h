// C helpers for the ucx backend, included by the cgo files (built only
// with the ucx tag). They keep UCX structs and status pointers on the C
// side so Go only sees handles and status codes.
#ifndef NIXL_NX_H
#define NIXL_NX_H
#include <ucp/api/ucp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ucs_status_t nx_init(int wakeup, const char *rx_seg, ucp_context_h *ctx, ucp_worker_h *w) {
	ucp_config_t *cfg;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) return st;
	// rx_seg (or NULL): a tcp receive segment that holds one eager WRITE
	// message of up to Config.EagerMax with its header: with UCX's default
	// 64K segments every 64 KiB message took two sends. The key without the
	// transport's prefix is the one ucp_config_modify hands to tcp.
	if (rx_seg != NULL && getenv("UCX_TCP_RX_SEG_SIZE") == NULL && getenv("UCX_RX_SEG_SIZE") == NULL)
		ucp_config_modify(cfg, "RX_SEG_SIZE", rx_seg);
	ucp_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_PARAM_FIELD_FEATURES;
	p.features = UCP_FEATURE_RMA | UCP_FEATURE_TAG | UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0);
	st = ucp_init(&p, cfg, ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) return st;
	ucp_worker_params_t wp;
	memset(&wp, 0, sizeof wp);
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
	st = ucp_worker_create(*ctx, &wp, w);
	if (st != UCS_OK) ucp_cleanup(*ctx);
	return st;
}

// nx_failures counts endpoint failures in the process (defined in
// backend.go; Go reads it atomically): the loops scan their endpoints
// only when it changed.
extern int nx_failures;

// nx_err_cb marks the endpoint failed; arg points at a C int owned by the
// Go connection.
static void nx_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st) {
	*(volatile int *)arg = (int)st;
	__atomic_add_fetch(&nx_failures, 1, __ATOMIC_SEQ_CST);
}

// nx_am_msg is one WRITE message the AM callback queued: its header
// (copied into the queue's hbuf), and its data: a rendezvous descriptor
// (rndv) or a copy of eager data in a buffer of the queue's pool (owned),
// NULL when there is none.
typedef struct {
	size_t hoff, hlen;
	void *data;
	size_t len;
	int rndv;
} nx_am_msg;

// nx_am_queue collects WRITE messages during ucp_worker_progress; the
// loop goroutine handles them after it and empties the queue (n = hlen =
// 0), so it grows only to the largest batch one progress call delivers.
typedef struct {
	nx_am_msg *msgs;
	int n, cap;
	char *hbuf;
	size_t hlen, hcap;
	int dropped; // messages dropped because the queue could not grow
	// Free eager buffers of pool_size bytes, for data up to that size
	// (larger eager data gets a buffer of its own).
	void **pool;
	int npool, pool_cap;
	size_t pool_size;
} nx_am_queue;

static void *nx_pool_get(nx_am_queue *q, size_t len) {
	if (len <= q->pool_size && q->npool > 0) return q->pool[--q->npool];
	return malloc(len <= q->pool_size ? q->pool_size : len);
}

// nx_pool_put returns an eager buffer of len bytes of data.
static void nx_pool_put(nx_am_queue *q, void *buf, size_t len) {
	if (len <= q->pool_size && q->npool < q->pool_cap) {
		q->pool[q->npool++] = buf;
		return;
	}
	free(buf);
}

// nx_am_cb queues a WRITE message. It keeps a rendezvous descriptor
// (UCS_INPROGRESS) for the loop to receive into the destination it
// validates, and copies eager data out at once: keeping UCX's buffer
// (UCP_AM_FLAG_PERSISTENT_DATA) made UCX allocate and page in a new one
// per message, which cost a 64 KiB WRITE between processes 8x its time.
static ucs_status_t nx_am_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                             const ucp_am_recv_param_t *param) {
	nx_am_queue *q = arg;
	int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
	if (q->n == q->cap) {
		int cap = q->cap ? 2 * q->cap : 64;
		nx_am_msg *m = realloc(q->msgs, cap * sizeof *m);
		if (m == NULL) { q->dropped++; return UCS_OK; }
		q->msgs = m;
		q->cap = cap;
	}
	if (q->hlen + header_length > q->hcap) {
		size_t cap = q->hcap ? 2 * q->hcap : 16384;
		while (cap < q->hlen + header_length) cap *= 2;
		char *h = realloc(q->hbuf, cap);
		if (h == NULL) { q->dropped++; return UCS_OK; }
		q->hbuf = h;
		q->hcap = cap;
	}
	void *keep = NULL;
	if (length > 0 && data != NULL) {
		if (rndv) {
			keep = data;
		} else if ((keep = nx_pool_get(q, length)) == NULL) {
			q->dropped++;
			return UCS_OK;
		} else {
			memcpy(keep, data, length);
		}
	}
	memcpy(q->hbuf + q->hlen, header, header_length);
	nx_am_msg *m = &q->msgs[q->n++];
	m->hoff = q->hlen;
	m->hlen = header_length;
	q->hlen += header_length;
	m->data = keep;
	m->len = length;
	m->rndv = rndv;
	return rndv && keep != NULL ? UCS_INPROGRESS : UCS_OK;
}

// nx_am_queue_new returns an empty queue whose pool keeps up to pool_cap
// eager buffers of pool_size bytes.
static nx_am_queue *nx_am_queue_new(size_t pool_size, int pool_cap) {
	nx_am_queue *q = calloc(1, sizeof *q);
	if (q == NULL) return NULL;
	q->pool = calloc(pool_cap > 0 ? pool_cap : 1, sizeof *q->pool);
	if (q->pool == NULL) { free(q); return NULL; }
	q->pool_cap = pool_cap;
	q->pool_size = pool_size;
	return q;
}

static ucs_status_t nx_am_listen(ucp_worker_h w, unsigned id, nx_am_queue *q) {
	ucp_am_handler_param_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
		UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
	p.id = id;
	p.flags = UCP_AM_FLAG_WHOLE_MSG;
	p.cb = nx_am_cb;
	p.arg = q;
	return ucp_worker_set_am_recv_handler(w, &p);
}

// nx_am_queue_free frees q once its worker is destroyed (which released
// the rendezvous descriptors of messages still queued; their eager copies
// are q's own).
static void nx_am_queue_free(nx_am_queue *q) {
	for (int i = 0; i < q->n; i++)
		if (!q->msgs[i].rndv) free(q->msgs[i].data);
	while (q->npool > 0) free(q->pool[--q->npool]);
	free(q->pool);
	free(q->msgs);
	free(q->hbuf);
	free(q);
}

// nx_progress progresses w (once, or with all set until it has nothing
// more to do), then peeks for waiting notifications, and with acks set for
// acks (under ack_mask) nobody waits for, all in one cgo call. Over tcp
// every progress call is an epoll_wait, and the call that finds nothing
// more cost a 64 KiB WRITE's initiator five of them: progressing once and
// coming back after the loop's other work moved 15-20% more pinned. Over
// shared memory a call costs no system call and draining in C moved 1 MiB
// 25% faster. Bits of the result: 1 progress was made, 2 a notification
// waits, 4 WRITE messages are queued, 8 an ack.
static int nx_progress(ucp_worker_h w, int all, uint64_t notif_tag, nx_am_queue *q, int acks, uint64_t ack_tag, uint64_t ack_mask) {
	int r = 0;
	if (all) {
		while (ucp_worker_progress(w) != 0) r = 1;
	} else if (ucp_worker_progress(w) != 0) {
		r = 1;
	}
	ucp_tag_recv_info_t info;
	if (ucp_tag_probe_nb(w, notif_tag, (uint64_t)-1, 0, &info) != NULL) r |= 2;
	if (q->n > 0) r |= 4;
	if (acks && ucp_tag_probe_nb(w, ack_tag, ack_mask, 0, &info) != NULL) r |= 8;
	return r;
}

static ucs_status_t nx_ep_create(ucp_worker_h w, const void *addr, int peer_errs, int *failed, ucp_ep_h *ep) {
	ucp_ep_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
		UCP_EP_PARAM_FIELD_ERR_HANDLER;
	p.address = (const ucp_address_t *)addr;
	p.err_mode = peer_errs ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
	p.err_handler.cb = nx_err_cb;
	p.err_handler.arg = failed;
	return ucp_ep_create(w, &p, ep);
}

// nx_ep_am_tcp reports whether ep's active messages go over UCX's tcp
// transport, from the lane table ucp_ep_print_info writes (UCX 1.13 has no
// query for it): 1 yes, 0 no or unknown.
static int nx_ep_am_tcp(ucp_ep_h ep) {
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (f == NULL) return 0;
	ucp_ep_print_info(ep, f);
	fclose(f);
	int tcp = 0;
	for (char *line = buf; line != NULL && *line != '\0';) {
		char *end = strchr(line, '\n');
		if (end != NULL) *end = '\0';
		if (strstr(line, "lane[") != NULL && strstr(line, " am ") != NULL) {
			tcp = strstr(line, ":tcp/") != NULL;
			break;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	free(buf);
	return tcp;
}

// nx_status turns a status pointer into (request, status): a NULL request
// means the operation already finished with the returned status.
static void *nx_status(ucs_status_ptr_t r, ucs_status_t *st) {
	if (r == NULL) { *st = UCS_OK; return NULL; }
	if (UCS_PTR_IS_ERR(r)) { *st = UCS_PTR_STATUS(r); return NULL; }
	*st = UCS_INPROGRESS;
	return r;
}

// nx_rma posts a put or get. Its request is released at once: completion
// is observed through the endpoint flush that follows every batch.
static ucs_status_t nx_rma(ucp_ep_h ep, int get, void *buf, size_t len, uint64_t raddr, ucp_rkey_h rkey) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	ucs_status_ptr_t r = get ? ucp_get_nbx(ep, buf, len, raddr, rkey, &p)
	                         : ucp_put_nbx(ep, buf, len, raddr, rkey, &p);
	ucs_status_t st;
	void *req = nx_status(r, &st);
	if (req != NULL) ucp_request_free(req);
	return st == UCS_INPROGRESS ? UCS_OK : st;
}

static void *nx_flush(ucp_ep_h ep, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	return nx_status(ucp_ep_flush_nbx(ep, &p), st);
}

static void *nx_tag_send(ucp_ep_h ep, void *buf, size_t len, uint64_t tag, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	return nx_status(ucp_tag_send_nbx(ep, buf, len, tag, &p), st);
}

// nx_am_send sends one WRITE message: header, then the data at buf
// (inside registered memory memh, or NULL). With eager set the data goes
// eagerly (the target copies it out of UCX's buffer), else UCX chooses:
// large data by rendezvous, zero-copy. The header must live until the
// send completes.
static void *nx_am_send(ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen, void *buf, size_t len, ucp_mem_h memh,
                        int eager, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = eager ? UCP_AM_SEND_FLAG_EAGER : 0;
	if (memh != NULL) { p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH; p.memh = memh; }
	return nx_status(ucp_am_send_nbx(ep, id, hdr, hlen, buf, len, &p), st);
}

// nx_am_recv receives a rendezvous WRITE message's data into buf.
static void *nx_am_recv(ucp_worker_h w, void *desc, void *buf, size_t len, ucp_mem_h memh, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	if (memh != NULL) { p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH; p.memh = memh; }
	return nx_status(ucp_am_recv_data_nbx(w, desc, buf, len, &p), st);
}

// nx_tag_recv posts a receive of the message with exactly this tag into buf.
static void *nx_tag_recv(ucp_worker_h w, void *buf, size_t len, uint64_t tag, ucp_mem_h memh, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	if (memh != NULL) { p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH; p.memh = memh; }
	return nx_status(ucp_tag_recv_nbx(w, buf, len, tag, (ucp_tag_t)-1, &p), st);
}

static void nx_cancel(ucp_worker_h w, void *req) { ucp_request_cancel(w, req); }

static void *nx_ep_close(ucp_ep_h ep) {
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_EP_CLOSE_FLAG_FORCE;
	ucs_status_t st;
	return nx_status(ucp_ep_close_nbx(ep, &p), &st);
}

// nx_check_all checks n requests at once (one cgo call a poll instead of
// one a request): st[i] gets each status; finished requests are freed.
// It returns how many finished.
static int nx_check_all(const uintptr_t *reqs, int n, ucs_status_t *st) {
	int done = 0;
	for (int i = 0; i < n; i++) {
		st[i] = ucp_request_check_status((void *)reqs[i]);
		if (st[i] != UCS_INPROGRESS) {
			ucp_request_free((void *)reqs[i]);
			done++;
		}
	}
	return done;
}

// nx_tag_poll receives one pending message with the given tag: into buf
// when it fits in cap bytes (*out = buf), else into a malloc'd buffer
// (*out; the caller frees it). Returns its length, -1 when none is
// waiting, -2 on a receive error. Notifications and acks are small, so
// waiting for the receive to finish here is short.
static ssize_t nx_tag_poll(ucp_worker_h w, uint64_t tag, uint64_t mask, void *buf, size_t cap, void **out) {
	ucp_tag_recv_info_t info;
	ucp_tag_message_h msg = ucp_tag_probe_nb(w, tag, mask, 1, &info);
	if (msg == NULL) return -1;
	if (info.length > cap || buf == NULL) buf = malloc(info.length ? info.length : 1);
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	ucs_status_t st;
	void *req = nx_status(ucp_tag_msg_recv_nbx(w, buf, info.length, msg, &p), &st);
	if (req != NULL) {
		while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) ucp_worker_progress(w);
		ucp_request_free(req);
	}
	*out = buf;
	return st == UCS_OK ? (ssize_t)info.length : -2;
}

// nx_acks are the ack messages, one per code: a target sends them from
// here instead of allocating one per WRITE.
static const uint64_t nx_acks[4] = {0, 1, 2, 3};

static void *nx_send_ack(ucp_ep_h ep, int code, uint64_t tag, ucs_status_t *st) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	return nx_status(ucp_tag_send_nbx(ep, &nx_acks[code], 8, tag, &p), st);
}

// nx_wait sleeps until the worker has events, wakefd is readable, or
// timeout_ms passes. It returns 1 when events may be pending.
static int nx_wait(ucp_worker_h w, int efd, int wakefd, int timeout_ms) {
	ucs_status_t st = ucp_worker_arm(w);
	if (st == UCS_ERR_BUSY) return 1;
	if (st != UCS_OK) { usleep(100); return 1; }
	struct pollfd fds[2] = {{efd, POLLIN, 0}, {wakefd, POLLIN, 0}};
	int n = poll(fds, 2, timeout_ms);
	if (n > 0 && (fds[1].revents & POLLIN)) {
		char b[64];
		while (read(wakefd, b, sizeof b) > 0) {}
	}
	return n > 0;
}

static ucs_status_t nx_mem_map(ucp_context_h ctx, void *addr, size_t len, ucp_mem_h *memh, void **rkey, size_t *rkey_len) {
	ucp_mem_map_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	p.address = addr;
	p.length = len;
	ucs_status_t st = ucp_mem_map(ctx, &p, memh);
	if (st != UCS_OK) return st;
	st = ucp_rkey_pack(ctx, *memh, rkey, rkey_len);
	if (st != UCS_OK) ucp_mem_unmap(ctx, *memh);
	return st;
}
#endif
