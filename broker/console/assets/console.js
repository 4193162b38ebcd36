// The raftmq console: one EventSource on /console/events of the node the
// page was loaded from; when that node stops answering, the same stream
// from another node of the group (their HTTP addresses come with every
// snapshot), and the page says so.
"use strict";
(function () {
  var STALE_MS = 3500; // no snapshot for this long: the node is taken as gone
  var state = { es: null, timer: 0, switchedAt: 0, originName: "", addr: location.host, origin: location.host, nodes: [], lastAt: 0, servedBy: "" };
  var $ = function (id) { return document.getElementById(id); };

  function text(id, v) { var e = $(id); if (e.textContent !== String(v)) e.textContent = v; }
  function cell(tr, v, cls) { var td = document.createElement("td"); td.textContent = v; if (cls) td.className = cls; tr.appendChild(td); return td; }
  function clock(t) { var d = new Date(t); return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0"); }
  function rate(r) { return r >= 100 ? Math.round(r).toLocaleString() : r.toFixed(1); }

  function render(s) {
    text("group", s.group + (s.error ? " (" + s.error + ")" : ""));
    text("leader", s.leader || "none");
    text("term", s.term);
    text("changes", s.leaderChanges);
    text("produce-rate", rate(s.produceRate));
    text("consume-rate", rate(s.consumeRate));
    text("seen-by", s.answeredBy);
    document.querySelectorAll(".node-id").forEach(function (e) { e.textContent = s.answeredBy; });
    text("updated", clock(s.time));
    var tb = $("nodes").tBodies[0], rows = document.createDocumentFragment();
    s.nodes.forEach(function (n) {
      var tr = document.createElement("tr");
      tr.id = "node-" + n.id;
      tr.dataset.role = n.role;
      if (n.id === s.leader) tr.className = "leader";
      cell(tr, n.id + (n.voter ? "" : " (non-voter)"));
      cell(tr, n.role, "role-" + n.role);
      var h = cell(tr, n.damaged ? "damaged" : n.healthy ? "healthy" : "unhealthy", n.healthy ? "ok" : "bad");
      if (n.error) h.title = n.error;
      var gone = n.role === "down" || n.role === "unknown"; // its figures are stale or unknown
      [n.term, n.applied, n.commit, n.last, n.lag].forEach(function (x) { cell(tr, gone ? "–" : x, "num"); });
      cell(tr, gone ? "–" : n.load.toFixed(2), "num"); cell(tr, n.http || "");
      rows.appendChild(tr);
    });
    tb.replaceChildren(rows);
    var ol = $("timeline"), items = document.createDocumentFragment(), tl = s.timeline || [];
    for (var i = tl.length - 1; i >= 0; i--) {
      var c = tl[i], li = document.createElement("li"), tm = document.createElement("time"), what = document.createElement("span");
      tm.textContent = clock(c.time); tm.dateTime = c.time;
      li.dataset.leader = c.leader;
      if (c.leader) {
        what.textContent = "leader " + c.leader + " (term " + c.term + ")";
      } else {
        what.className = "none";
        what.textContent = "no leader" + (i + 1 < tl.length ? " for " + (Date.parse(tl[i + 1].time) - Date.parse(c.time)) + " ms (from when this node saw the leader gone)" : "");
      }
      li.appendChild(tm); li.appendChild(what); items.appendChild(li);
    }
    ol.replaceChildren(items);
  }

  function say(msg, cls) { var p = $("source"); p.textContent = msg; p.className = "source " + (cls || ""); }

  function urlOf(addr) { return addr === location.host ? "" : location.protocol + "//" + addr; }

  function connect(addr) {
    if (state.es) state.es.close();
    state.addr = addr;
    state.servedBy = "";
    state.lastAt = Date.now();
    var es = new EventSource(urlOf(addr) + "/console/events");
    state.es = es;
    es.onmessage = function (ev) {
      if (es !== state.es) return;
      var s = JSON.parse(ev.data);
      state.lastAt = Date.now();
      state.nodes = s.nodes;
      state.servedBy = s.answeredBy;
      if (addr === state.origin) { state.originName = s.answeredBy + " (" + addr + ")"; say("Live from " + state.originName + ", the node this page was loaded from."); }
      else say("Live from " + s.answeredBy + " (" + addr + "): " + (state.originName || state.origin) + ", the node this page was loaded from, stopped answering.", "switched");
      render(s);
      if (!state.rendered) { state.rendered = true; performance.mark("console-first-render"); }
    };
    es.onerror = function () { if (es === state.es && es.readyState !== EventSource.OPEN) failover(); };
  }

  // failover moves the stream to the next node of the group, healthy ones
  // first, in the order of the last snapshot; when every node fails in
  // turn it tries again once a second, not in a tight loop.
  function failover() {
    if (state.timer) return;
    var from = state.addr, lost = (state.servedBy ? state.servedBy + " " : "") + "(" + from + ")";
    var gone = function (n) { return n.http === from || (state.servedBy && n.id === state.servedBy); };
    if (state.es) { state.es.close(); state.es = null; }
    var others = state.nodes.filter(function (n) { return n.http && !gone(n); });
    others.sort(function (a, b) { return (b.healthy ? 1 : 0) - (a.healthy ? 1 : 0); });
    var next = others.length ? others[0].http : from;
    say("Lost the connection to " + lost + (others.length ? "; switching to " + others[0].id + " (" + next + ")…" : "; retrying it…"), "lost");
    // Rotate, so that a next node that is down too leads to the one after it.
    state.nodes = state.nodes.filter(function (n) { return !gone(n); }).concat(state.nodes.filter(gone));
    var wait = Date.now() - state.switchedAt < 1000 ? 1000 : 0;
    state.timer = setTimeout(function () { state.timer = 0; state.switchedAt = Date.now(); connect(next); }, wait);
  }

  setInterval(function () { if (Date.now() - state.lastAt > STALE_MS) failover(); }, 1000);
  connect(location.host);
})();
