// The Switchyard console: renders the frontend's shared fleet snapshot.
// It follows /console/api/events (server-sent events, read with fetch so
// the API key travels in the Authorization header) and falls back to
// polling /console/api/snapshot when the stream fails.
"use strict";
(function () {
  const api = "api/";
  const pollMs = 2000;
  let key = sessionStorage.getItem("switchyard-key") || "";
  let lastSeq = -1;
  let stream = null;

  const $ = (id) => document.getElementById(id);
  const headers = () => (key ? { Authorization: "Bearer " + key } : {});
  const setStatus = (text, cls) => { const s = $("status"); s.textContent = text; s.className = "status " + cls; };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function secs(v) {
    if (!v) return "–";
    return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 1) + " ms" : v.toFixed(2) + " s";
  }

  function spark(name, points, fmt) {
    const svg = $("spark-" + name);
    const vals = points.map((p) => (p[name] == null ? 0 : p[name]));
    const max = Math.max(...vals, 1e-9);
    const n = Math.max(vals.length - 1, 1);
    const line = vals.map((v, i) => (i * 300 / n).toFixed(1) + "," + (38 - v / max * 36).toFixed(1)).join(" ");
    svg.innerHTML = '<polyline points="' + line + '"/>';
    const last = points.length ? points[points.length - 1][name] : null;
    $(name).textContent = fmt(last);
  }

  function kvCell(load) {
    const td = el("td");
    if (!load) { td.textContent = "–"; return td; }
    for (const t of load.kv) {
      const span = el("span", undefined, "tier");
      span.dataset.tier = t.name;
      if (t.used != null && t.total > 0) {
        const bar = el("span", undefined, "bar");
        const fill = el("i");
        fill.style.width = Math.min(100, t.used / t.total * 100).toFixed(0) + "%";
        bar.appendChild(fill);
        span.append(t.name + " ", bar, " " + t.used + "/" + t.total);
      } else {
        span.textContent = t.name + " " + t.total;
      }
      td.appendChild(span);
    }
    return td;
  }

  function drainButton(id) {
    const td = el("td", undefined, "admin-only");
    const b = el("button", "drain");
    b.dataset.drain = id;
    b.onclick = async () => {
      if (!confirm("Drain " + id + "? It finishes its streams and is not restarted.")) return;
      const r = await fetch(api + "drain", { method: "POST", headers: { ...headers(), "Content-Type": "application/json" }, body: JSON.stringify({ id }) });
      const body = await r.json().catch(() => ({}));
      alert(r.ok ? "Draining " + body.id + " (pool " + body.pool + ")" : "Drain failed: " + ((body.error && body.error.message) || r.status));
    };
    td.appendChild(b);
    return td;
  }

  let routing = null;

  function renderRouting(r) {
    routing = r || null;
    if (!r) { $("routing").textContent = "no router metrics yet"; return; }
    const pct = (v) => (v == null ? "–" : (v * 100).toFixed(1) + " %");
    $("routing").textContent = r.decisions_per_second.toFixed(1) + " decisions/s · KV hit ratio " + pct(r.hit_ratio) +
      " · canary share " + pct(r.canary_share);
  }

  function cordonButton(inst) {
    const td = el("td", undefined, "operator-only");
    const b = el("button", inst.cordoned ? "uncordon" : "cordon");
    b.dataset.cordon = inst.id;
    b.onclick = async () => {
      try { await post("cordon", { id: inst.id, cordoned: !inst.cordoned }); } catch (e) { alert("Failed: " + e.message); }
    };
    td.appendChild(b);
    return td;
  }

  function renderInstances(list) {
    const body = $("instances").tBodies[0];
    body.replaceChildren();
    for (const inst of list) {
      const tr = el("tr");
      tr.dataset.id = inst.id;
      tr.dataset.role = inst.role;
      const l = inst.load;
      tr.append(el("td", inst.id), el("td", inst.role), el("td", inst.model || ""), el("td", inst.version),
        el("td", inst.canary ? "canary" : ""), el("td", inst.cordoned ? inst.health + ", cordoned" : inst.health, "health-" + inst.health),
        el("td", l ? String(l.running) : "", "num running"), el("td", l ? String(l.waiting) : "", "num waiting"));
      const wr = routing && routing.workers && routing.workers[inst.id];
      tr.append(el("td", wr ? wr.decisions_per_second.toFixed(1) : "", "num routed"),
        el("td", wr ? wr.mean_overlap_blocks.toFixed(1) : "", "num overlap"), kvCell(l));
      const worker = inst.role === "decode" || inst.role === "prefill";
      tr.appendChild(worker ? drainButton(inst.id) : el("td", "", "admin-only"));
      tr.appendChild(worker ? cordonButton(inst) : el("td", "", "operator-only"));
      body.appendChild(tr);
    }
    $("count").textContent = "(" + list.length + ")";
  }

  function renderPlan(plan) {
    const body = $("plan").tBodies[0];
    body.replaceChildren();
    $("plan").hidden = !plan;
    if (!plan) { $("plan-reason").textContent = "no planner"; return; }
    $("plan-reason").textContent = plan.reason + (plan.leader ? " (leader)" : "") +
      (plan.decided_at && !plan.decided_at.startsWith("0001") ? ", decided " + new Date(plan.decided_at).toLocaleTimeString() : "");
    for (const p of plan.pools) {
      const tr = el("tr");
      tr.append(el("td", p.model), el("td", p.role), el("td", String(p.observed), "num"),
        el("td", String(p.desired) + (p.pending ? " (pending)" : ""), "num"), el("td", p.rule), el("td", p.reason));
      body.appendChild(tr);
    }
  }

  async function post(path, body) {
    const r = await fetch(api + path, { method: "POST", headers: { ...headers(), "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const out = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error((out.error && out.error.message) || String(r.status));
    return out;
  }

  function endButtons(role) {
    const td = el("td", undefined, "operator-only");
    for (const promote of [true, false]) {
      const b = el("button", promote ? "promote" : "abort");
      b.dataset.end = role;
      b.onclick = async () => {
        if (!confirm((promote ? "Promote" : "Abort") + " the " + role + " canary?")) return;
        try { await post("rollout/end", { role, promote }); } catch (e) { alert("Failed: " + e.message); }
      };
      td.appendChild(b);
    }
    return td;
  }

  function renderRollouts(plan) {
    const list = (plan && plan.rollouts) || [];
    const body = $("rollouts").tBodies[0];
    body.replaceChildren();
    $("rollouts").hidden = list.length === 0;
    $("rollouts-none").hidden = list.length > 0;
    for (const r of list) {
      const tr = el("tr");
      tr.dataset.role = r.role;
      tr.dataset.state = r.state;
      const c = r.canary || {}, b = r.baseline || {};
      tr.append(el("td", r.role), el("td", r.version), el("td", String(r.weight), "num weight"), el("td", r.state),
        el("td", (c.requests || 0) + "/" + (c.errors || 0), "num"), el("td", (b.requests || 0) + "/" + (b.errors || 0), "num"),
        el("td", secs(c.ttft_p50) + " / " + secs(b.ttft_p50), "num"), el("td", secs(c.itl_p50) + " / " + secs(b.itl_p50), "num"),
        el("td", r.reason));
      tr.appendChild(r.state === "judging" || r.state === "holding" ? endButtons(r.role) : el("td", "", "operator-only"));
      body.appendChild(tr);
    }
  }

  $("rolloutform").onsubmit = async (e) => {
    e.preventDefault();
    const body = { role: $("ro-role").value, version: $("ro-version").value.trim(), weight: Number($("ro-weight").value), judge: $("ro-judge").checked };
    try { await post("rollout", body); } catch (err) { alert("Failed: " + err.message); }
  };

  function render(s) {
    if (s.seq <= lastSeq) return;
    lastSeq = s.seq;
    document.body.dataset.seq = String(s.seq);
    renderRouting(s.routing);
    renderInstances(s.instances);
    renderPlan(s.plan);
    renderRollouts(s.plan);
    const pts = s.latency || [];
    for (const n of ["ttft_p50", "ttft_p99", "itl_p50", "itl_p99"]) spark(n, pts, secs);
    spark("hit_ratio", pts, (v) => (v == null ? "–" : (v * 100).toFixed(0) + " %"));
    const last = pts.length ? pts[pts.length - 1].ttft_phases : null;
    $("phases").textContent = last ? "queue " + secs(last.queue) + " · prefill " + secs(last.prefill) + " · transfer " +
      secs(last.transfer) + " · first decode " + secs(last.first_decode) + " (" + last.requests + " requests)" : "–";
    $("errors").textContent = (s.errors || []).join("; ");
  }

  async function poll() {
    try {
      const r = await fetch(api + "snapshot", { headers: headers() });
      if (r.status === 401) { setStatus("API key needed", "err"); return; }
      render(await r.json());
      setStatus("polling", "poll");
    } catch (e) {
      setStatus("offline", "err");
    }
  }

  // follow reads the event stream until it ends; the caller falls back.
  async function follow(ctl) {
    const r = await fetch(api + "events", { headers: headers(), signal: ctl.signal });
    if (!r.ok || !r.body) throw new Error("events: " + r.status);
    setStatus("live", "live");
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = ev.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) render(JSON.parse(data));
      }
    }
  }

  function renderTraces(list) {
    const box = $("traces");
    box.replaceChildren();
    $("traces-none").hidden = list.length > 0;
    for (const t of list.slice(0, 5)) {
      const d = el("div", undefined, "trace");
      d.dataset.request = t.request_id;
      const head = t.endpoint + " " + t.model + " · " + t.request_id + (t.trace_id ? " · trace " + t.trace_id : "") +
        (t.done ? " · " + t.duration_ms.toFixed(1) + " ms" : " · running");
      d.appendChild(el("b", head));
      if (t.error) d.appendChild(el("div", t.error, "err"));
      const ol = el("ol");
      for (const e of t.events) ol.appendChild(el("li", "+" + e.at_ms.toFixed(1) + " ms " + e.kind + (e.detail ? ": " + e.detail : "")));
      d.appendChild(ol);
      box.appendChild(d);
    }
  }

  async function pollTraces() {
    try {
      const r = await fetch(api + "traces", { headers: headers() });
      if (r.ok) renderTraces((await r.json()).traces || []);
    } catch (e) { /* the snapshot's status shows the outage */ }
  }
  setInterval(pollTraces, 5000);

  async function start() {
    pollTraces();
    if (stream) stream.abort();
    const ctl = new AbortController();
    stream = ctl;
    fetch(api + "whoami", { headers: headers() }).then((r) => r.json()).then((w) => {
      document.body.classList.toggle("admin", !!(w.admin && w.drain));
      document.body.classList.toggle("operator", !!w.admin);
    }).catch(() => {});
    while (stream === ctl) {
      try { await follow(ctl); } catch (e) { if (stream !== ctl) return; }
      await poll();
      await new Promise((res) => setTimeout(res, pollMs));
    }
  }

  $("keyform").onsubmit = (e) => {
    e.preventDefault();
    key = $("key").value.trim();
    sessionStorage.setItem("switchyard-key", key);
    lastSeq = -1;
    start();
  };
  start();
})();
