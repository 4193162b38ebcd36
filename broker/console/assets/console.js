// The raftmq console: one EventSource on /console/events of the node the
// page was loaded from; when that node stops answering, the same stream
// from another node of the group (their HTTP addresses come with every
// snapshot), and the page says so.
"use strict";
(function () {
  var STALE_MS = 3500; // no snapshot for this long: the node is taken as gone
  var state = { served: {}, es: null, timer: 0, switchedAt: 0, originName: "", addr: location.host, origin: location.host, nodes: [], lastAt: 0, servedBy: "",
    page: "overview", cred: null, session: { auth: "disabled", admin: true }, leader: "", confirm: "", force: "", gen: 0 };
  var PAGES = ["overview", "topics", "groups", "messages"], READ = "/raftmq.v1.Broker/ListTopics";
  var $ = function (id) { return document.getElementById(id); };

  function text(id, v) { var e = $(id); if (e.textContent !== String(v)) e.textContent = v; }
  function cell(tr, v, cls) { var td = document.createElement("td"); td.textContent = v; if (cls) td.className = cls; tr.appendChild(td); return td; }
  function clock(t) { var d = new Date(t); return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0"); }
  function rate(r) { return r >= 100 ? Math.round(r).toLocaleString() : r.toFixed(1); }

  function render(s) {
    text("group", s.group + (s.error ? " (" + s.error + ")" : ""));
    document.getElementById("group").title = s.groupId ? "group id " + s.groupId : "";
    text("leader", s.leader || "none");
    text("term", s.term);
    text("changes", s.leaderChanges);
    text("produce-rate", rate(s.produceRate));
    text("consume-rate", rate(s.consumeRate));
    text("seen-by", s.answeredBy);
    document.querySelectorAll(".node-id").forEach(function (e) { e.textContent = s.answeredBy; });
    text("updated", clock(s.time));
    var tb = $("nodes").tBodies[0], rows = document.createDocumentFragment(), now = Date.parse(s.time), served = {};
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
      cell(tr, gone ? "–" : n.load.toFixed(2), "num");
      // Messages the node served to consumers a second, from the growth of
      // its count (since it started, as last heard) between two snapshots.
      var count = n.servedAsLeader + n.servedAsFollower, prev = state.served[n.id];
      served[n.id] = { count: count, at: now };
      var r = prev && now > prev.at && count >= prev.count ? (count - prev.count) * 1000 / (now - prev.at) : null;
      cell(tr, gone || r === null ? "–" : rate(r), "num reads-rate");
      cell(tr, n.http || "");
      rows.appendChild(tr);
    });
    state.served = served;
    tb.replaceChildren(rows);
    renderCluster(s);
    state.leader = s.leader;
    if (s.groupReads) renderGroupReads(s.groupReads);
    if (s.reads) renderReads(s.reads);
    if (s.topics) renderTopics(s.topics);
    if (s.groups) renderGroups(s.groups);
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

  // The cluster view (a node started with name servers): a row a group,
  // linking to the console of the node that leads it.
  function renderCluster(s) {
    $("cluster-section").hidden = !s.cluster && !s.clusterError;
    note("cluster-error", s.clusterError ? "the cluster view is unavailable: " + s.clusterError : "", true);
    var rows = document.createDocumentFragment();
    (s.cluster || []).forEach(function (g) {
      var tr = document.createElement("tr");
      tr.id = "group-" + g.name;
      if (g.name === s.group) tr.className = "leader";
      cell(tr, g.name);
      cell(tr, g.cluster);
      cell(tr, g.error ? "unknown" : g.leader || "none", g.leader ? "" : "bad").title = g.error || "";
      cell(tr, g.error ? "–" : g.term, "num");
      var up = g.nodes.filter(function (n) { return n.healthy; }).length;
      cell(tr, g.error ? "–" : up + "/" + g.nodes.length, up === g.nodes.length && !g.error ? "ok" : "bad");
      cell(tr, g.error ? "–" : Math.max.apply(null, g.nodes.map(function (n) { return n.lag; }).concat([0])), "num");
      var via = g.nodes.filter(function (n) { return n.http && n.id === g.leader; }).concat(g.nodes.filter(function (n) { return n.http; }))[0];
      var td = cell(tr, "");
      if (via && g.name !== s.group) {
        var a = document.createElement("a");
        a.href = location.protocol + "//" + via.http + "/"; a.textContent = via.http;
        td.appendChild(a);
      } else if (g.name === s.group) {
        td.textContent = "this page";
      }
      rows.appendChild(tr);
    });
    $("cluster").tBodies[0].replaceChildren(rows);
  }

  function renderTopics(ts) {
    var rows = document.createDocumentFragment();
    ts.forEach(function (t) {
      var tr = document.createElement("tr");
      tr.id = "topic-" + t.name; tr.dataset.name = t.name; tr.dataset.queues = t.queues.length; tr.dataset.messages = t.messages;
      if (t.system) tr.className = "system";
      cell(tr, t.name);
      cell(tr, (t.readable ? "r" : "-") + (t.writable ? "w" : "-") + " (" + t.perm + ")");
      cell(tr, t.queues.length, "num");
      cell(tr, t.queues.map(function (q) { return q.min; }).join(" "), "offsets");
      cell(tr, t.queues.map(function (q) { return q.max; }).join(" "), "offsets");
      cell(tr, t.messages, "num"); cell(tr, rate(t.rate), "num");
      var td = cell(tr, "", "change");
      if (!t.system) {
        [[6, "rw"], [4, "r"], [2, "w"]].forEach(function (p) {
          var pb = document.createElement("button");
          pb.className = "perm"; pb.type = "button"; pb.dataset.topic = t.name; pb.dataset.perm = p[0];
          pb.textContent = p[1]; pb.title = "set the permission to " + p[0]; pb.disabled = t.perm === p[0];
          td.appendChild(pb);
        });
        var b = document.createElement("button");
        b.className = "del"; b.type = "button"; b.dataset.topic = t.name;
        b.textContent = state.force === t.name ? "Delete anyway?" : state.confirm === t.name ? "Really delete?" : "Delete";
        td.appendChild(b);
      }
      rows.appendChild(tr);
    });
    $("topics").tBodies[0].replaceChildren(rows);
  }

  function renderGroupReads(r) {
    var n = r.asLeader + r.asFollower, p = $("group-reads");
    p.dataset.share = r.followerShare; p.dataset.served = n;
    text("group-reads", n ? (100 * r.followerShare).toFixed(1) + "% of " + n.toLocaleString() + " messages served by followers (" +
      r.asLeader.toLocaleString() + " by the leader of the moment, " + r.asFollower.toLocaleString() + " by followers)." : "No messages served yet.");
  }

  function renderReads(r) {
    var n = r.asLeader + r.asFollower, p = $("reads");
    p.dataset.share = r.followerShare; p.dataset.served = n;
    text("reads", n ? n.toLocaleString() + " messages served: " + r.asLeader.toLocaleString() + " as leader, " + r.asFollower.toLocaleString() +
      " as follower (" + (100 * r.followerShare).toFixed(1) + "% served by this node as a follower)." : "No messages served yet.");
    var rows = document.createDocumentFragment();
    r.suggestions.forEach(function (x) {
      var tr = document.createElement("tr");
      tr.dataset.target = x.target; tr.dataset.reason = x.reason;
      cell(tr, x.target); cell(tr, x.reason); cell(tr, x.count.toLocaleString(), "num");
      rows.appendChild(tr);
    });
    $("suggestions").tBodies[0].replaceChildren(rows);
  }

  function renderGroups(g) {
    note("groups-msg", g.error ? "Groups: " + g.error : "", true);
    var box = document.createDocumentFragment();
    g.groups.forEach(function (x) {
      var d = document.createElement("div"), h = document.createElement("h3"), p = document.createElement("p");
      d.className = "group"; d.id = "group-" + x.name; d.dataset.name = x.name; d.dataset.lag = x.lag; d.dataset.dead = x.deadLetters; d.dataset.members = x.members.length;
      h.textContent = x.name + (x.broadcast ? " (broadcast)" : "") + " · lag " + x.lag + " · dead letters " + x.deadLetters + " · generation " + x.generation + (x.error ? " · " + x.error : "");
      p.className = "members";
      p.textContent = x.members.length ? "members: " + x.members.map(function (m) {
        return m.id + " (" + Object.keys(m.queues).map(function (t) { return t + " " + m.queues[t].join(","); }).join("; ") + ")";
      }).join(", ") : "no live members";
      d.appendChild(h); d.appendChild(p);
      if (x.queues.length) {
        var t = document.createElement("table"), tb = document.createElement("tbody");
        t.innerHTML = "<thead><tr><th>topic</th><th>queue</th><th>member</th><th>committed</th><th>max</th><th>lag</th></tr></thead>";
        x.queues.forEach(function (q) {
          var tr = document.createElement("tr");
          tr.dataset.topic = q.topic; tr.dataset.queue = q.queue; tr.dataset.lag = q.lag; tr.dataset.committed = q.committed;
          cell(tr, q.topic); cell(tr, q.queue, "num"); cell(tr, q.member || "–");
          cell(tr, q.committed < 0 ? "none" : q.committed, "num"); cell(tr, q.max, "num"); cell(tr, q.lag, "num");
          tb.appendChild(tr);
        });
        t.appendChild(tb); d.appendChild(t);
      }
      box.appendChild(d);
    });
    if (g.more) { var m = document.createElement("p"); m.className = "muted"; m.textContent = g.more + " more groups not shown"; box.appendChild(m); }
    $("groups").replaceChildren(box);
  }

  // sign makes the call credential of one gRPC method, as the SDK does
  // (HMAC-SHA256 through the browser's Web Crypto: https or localhost).
  function sign(method) {
    if (!state.cred) return Promise.resolve("");
    if (!window.crypto || !crypto.subtle) return Promise.reject(new Error("signing needs the page over https (or from localhost): the browser offers no Web Crypto here"));
    var enc = new TextEncoder(), ms = String(Date.now()), nonce = Array.from(crypto.getRandomValues(new Uint8Array(8)), function (b) { return b.toString(16).padStart(2, "0"); }).join("");
    return crypto.subtle.importKey("raw", enc.encode(state.cred.sk), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]).then(function (k) {
      return crypto.subtle.sign("HMAC", k, enc.encode("raftmq-call-v1\n" + method + "\n" + state.cred.ak + "\n" + ms + "\n" + nonce));
    }).then(function (sig) {
      var b64 = btoa(String.fromCharCode.apply(null, new Uint8Array(sig))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
      return ["v1", state.cred.ak, ms, nonce, b64].join(" ");
    });
  }

  // call sends one change (or read) to addr's /console/api; a node that is
  // not the leader names it, and the change goes there once.
  function call(method, verb, path, body, addr, again) {
    return sign(method).then(function (cred) {
      var h = { "Content-Type": "application/json" };
      if (cred) h["Raftmq-Credential"] = cred;
      return fetch(urlOf(addr) + path, { method: verb, headers: h, body: body ? JSON.stringify(body) : undefined });
    }).then(function (r) {
      return r.json().catch(function () { return { error: "HTTP " + r.status }; }).then(function (j) {
        if (r.ok) return j;
        if (j.leaderHttp && !again && j.leaderHttp !== addr) return call(method, verb, path, body, j.leaderHttp, true);
        throw new Error(j.error || "HTTP " + r.status);
      });
    });
  }

  function leaderAddr() {
    var l = state.nodes.filter(function (n) { return n.id === state.leader && n.http && n.role !== "down"; });
    return l.length ? l[0].http : state.addr;
  }

  function note(id, msg, bad) { var p = $(id); p.hidden = !msg; p.textContent = msg; p.className = "msg" + (bad ? " bad" : ""); }

  function session() {
    var gen = ++state.gen;
    return sign(READ).then(function (cred) {
      return fetch("/console/api/session", { headers: cred ? { "Raftmq-Credential": cred } : {} });
    }).then(function (r) { return r.json(); }).then(function (s) {
      if (gen !== state.gen) return;
      state.session = s;
      var need = s.auth === "enforcing" && !s.user;
      $("signin").hidden = !need;
      text("signin-error", state.cred && s.error ? s.error : "");
      text("who", s.user ? "signed in as " + s.user + (s.admin ? " (admin)" : " (read-only)") : s.auth === "disabled" ? "" : "auth " + s.auth);
      document.body.classList.toggle("readonly", !s.admin);
      if (need) state.cred = null;
      if (state.page !== "overview") connect(state.addr);
    }).catch(function (e) { text("signin-error", e.message); });
  }

  function show() {
    var p = location.hash.replace(/^#/, "");
    state.page = PAGES.indexOf(p) >= 0 ? p : "overview";
    PAGES.forEach(function (x) { $("page-" + x).hidden = x !== state.page; });
    document.querySelectorAll("#pages a").forEach(function (a) { a.classList.toggle("on", a.dataset.page === state.page); });
  }

  function say(msg, cls) { var p = $("source"); p.textContent = msg; p.className = "source " + (cls || ""); }

  function urlOf(addr) { return addr === location.host ? "" : location.protocol + "//" + addr; }

  // streamURL is the stream of the page shown: the topics and groups
  // pages' carry their view, with a credential when the node asks one.
  function streamURL(addr) {
    var u = urlOf(addr) + "/console/events";
    var viewed = state.page === "topics" || state.page === "groups"; // the other pages need the overview only
    if (!viewed || (state.session.auth === "enforcing" && !state.cred)) return Promise.resolve(u);
    return sign(READ).then(function (cred) { return u + "?view=" + state.page + (cred ? "&cred=" + encodeURIComponent(cred) : ""); });
  }

  function connect(addr) {
    if (state.es) state.es.close();
    state.es = null;
    state.addr = addr;
    state.servedBy = "";
    state.lastAt = Date.now();
    var gen = ++state.streams;
    streamURL(addr).then(function (u) { if (gen === state.streams) open(addr, u); }, function (e) { say(e.message, "lost"); });
  }

  function open(addr, u) {
    var es = new EventSource(u);
    state.es = es;
    es.onmessage = function (ev) {
      if (es !== state.es) return;
      var s = JSON.parse(ev.data);
      state.lastAt = Date.now();
      state.nodes = s.nodes;
      state.servedBy = s.answeredBy;
      if (s.groups && s.groups.leaderHttp && s.groups.leaderHttp !== addr) { state.why = "leader"; connect(s.groups.leaderHttp); return; }
      if (state.why === "leader" && addr !== state.origin) say("Live from " + s.answeredBy + " (" + addr + "), the leader: it alone knows the groups' members.");
      else if (addr === state.origin) { state.originName = s.answeredBy + " (" + addr + ")"; say("Live from " + state.originName + ", the node this page was loaded from."); }
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
    state.why = "";
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

  state.streams = 0;
  setInterval(function () { if (Date.now() - state.lastAt > STALE_MS) failover(); }, 1000);
  window.addEventListener("hashchange", function () {
    show();
    // The groups page moved the stream to the leader; the others go back
    // to the node the page came from (or on, if it is gone).
    if (state.why === "leader" && state.page !== "groups") { state.why = ""; connect(state.origin); return; }
    connect(state.addr);
  });
  $("signin").addEventListener("submit", function (ev) {
    ev.preventDefault();
    state.cred = { ak: $("ak").value, sk: $("sk").value };
    $("sk").value = "";
    session();
  });
  $("create-topic").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var name = $("new-topic").value.trim(), q = $("new-queues").value;
    call("/raftmq.v1.Broker/CreateTopic", "POST", "/console/api/topics", { name: name, queues: q === "" ? 0 : Number(q) }, leaderAddr()).then(function (r) {
      note("topics-msg", "Created topic " + r.name + " with " + r.queues + " queues.");
      $("new-topic").value = "";
    }, function (e) { note("topics-msg", "Create " + JSON.stringify(name) + ": " + e.message, true); });
  });
  // A topic's buttons: a permission (one click), and Delete (two; after a
  // refusal for connected consumers a third, Delete anyway?, forces it).
  $("topics").addEventListener("click", function (ev) {
    var d = ev.target.dataset || {}, name = d.topic;
    if (!name) return;
    if (d.perm) {
      call("/raftmq.v1.Broker/UpdateTopic", "PATCH", "/console/api/topics", { name: name, perm: Number(d.perm) }, leaderAddr()).then(function (r) {
        note("topics-msg", "Topic " + r.name + ": permission " + r.perm + ".");
      }, function (e) { note("topics-msg", "Permission of " + JSON.stringify(name) + ": " + e.message, true); });
      return;
    }
    var force = state.force === name;
    if (!force && state.confirm !== name) { state.confirm = name; state.force = ""; ev.target.textContent = "Really delete?"; return; }
    state.confirm = ""; state.force = "";
    call("/raftmq.v1.Broker/DeleteTopic", "DELETE", "/console/api/topics?name=" + encodeURIComponent(name) + (force ? "&force=true" : ""), null, leaderAddr()).then(function () {
      note("topics-msg", "Deleted topic " + name + ".");
    }, function (e) {
      var busy = /--force/.test(e.message);
      if (busy) { state.force = name; ev.target.textContent = "Delete anyway?"; }
      note("topics-msg", "Delete " + JSON.stringify(name) + ": " + e.message + (busy ? "; click Delete anyway? to delete it while they read." : ""), true);
    });
  });
  var resetReq = null;
  function resetBody(dry) {
    var kind = $("reset-kind").value, v = $("reset-value").value.trim(), to = kind;
    if (kind === "offset") to = v;
    if (kind === "time") { var ms = Date.parse(v); if (isNaN(ms)) throw new Error("time " + JSON.stringify(v) + ": want e.g. 2026-12-06T03:00"); to = "@" + ms; }
    return { group: $("reset-group").value.trim(), topic: $("reset-topic").value.trim(), to: to, dryRun: dry };
  }
  function showOffsets(r) {
    var rows = document.createDocumentFragment();
    r.offsets.forEach(function (o) { var tr = document.createElement("tr"); tr.dataset.offset = o.offset; cell(tr, o.topic); cell(tr, "queue " + o.queue); cell(tr, (r.dryRun ? "would be " : "now ") + o.offset, "num"); rows.appendChild(tr); });
    $("reset-offsets").tBodies[0].replaceChildren(rows);
  }
  $("reset").addEventListener("input", function () { resetReq = null; $("reset-apply").disabled = true; });
  $("reset").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var body;
    try { body = resetBody(true); } catch (e) { note("reset-msg", e.message, true); return; }
    call("/raftmq.v1.Broker/ResetGroup", "POST", "/console/api/groups/reset", body, leaderAddr()).then(function (r) {
      resetReq = body; $("reset-apply").disabled = false; showOffsets(r);
      note("reset-msg", "Dry run: " + r.offsets.length + " queue(s) of " + r.topic + " would move for " + r.group + ". Apply to commit them.");
    }, function (e) { resetReq = null; $("reset-apply").disabled = true; note("reset-msg", "Reset " + JSON.stringify(body.group) + ": " + e.message, true); });
  });
  $("reset-apply").addEventListener("click", function () {
    if (!resetReq) return;
    var body = Object.assign({}, resetReq, { dryRun: false });
    $("reset-apply").disabled = true;
    call("/raftmq.v1.Broker/ResetGroup", "POST", "/console/api/groups/reset", body, leaderAddr()).then(function (r) {
      resetReq = null; showOffsets(r); note("reset-msg", "Reset " + r.group + " on " + r.topic + ": " + r.offsets.length + " queue(s) moved.");
    }, function (e) { note("reset-msg", "Reset " + JSON.stringify(body.group) + ": " + e.message, true); });
  });
  function deadLetters() {
    var g = $("dlq-group").value.trim();
    return call(READ, "GET", "/console/api/deadletters?group=" + encodeURIComponent(g) + "&max=100", null, leaderAddr()).then(function (ds) {
      var rows = document.createDocumentFragment();
      ds.forEach(function (d) {
        var tr = document.createElement("tr");
        tr.id = "dead-" + d.id; tr.dataset.id = d.id;
        cell(tr, d.id); cell(tr, d.topic); cell(tr, d.reconsumed, "num"); cell(tr, clock(d.born)); cell(tr, d.reason);
        cell(tr, d.text ? d.body : "hex " + d.bodyHex, "body");
        var td = cell(tr, "", "change"), b = document.createElement("button");
        b.type = "button"; b.textContent = "Resend"; b.dataset.resend = d.id; td.appendChild(b);
        rows.appendChild(tr);
      });
      $("deadletters").tBodies[0].replaceChildren(rows);
      note("dlq-msg", ds.length ? "" : "Group " + g + " has no dead letters.");
    }, function (e) { note("dlq-msg", "Dead letters of " + JSON.stringify(g) + ": " + e.message, true); });
  }
  $("dlq").addEventListener("submit", function (ev) { ev.preventDefault(); deadLetters(); });
  $("deadletters").addEventListener("click", function (ev) {
    var id = ev.target.dataset && ev.target.dataset.resend, g = $("dlq-group").value.trim();
    if (!id) return;
    call("/raftmq.v1.Broker/ResendDeadLetter", "POST", "/console/api/deadletters", { group: g, id: id }, leaderAddr()).then(function (r) {
      note("dlq-msg", "Resent " + id + " to " + r.topic + " (queue " + r.queue + ", offset " + r.offset + (r.duplicate ? ", already resent before" : "") + ").");
    }, function (e) { note("dlq-msg", "Resend " + id + ": " + e.message, true); });
  });
  var found = [];
  function renderMessages() {
    var hex = document.querySelector("input[name=body-as]:checked").value === "hex", rows = document.createDocumentFragment();
    found.forEach(function (m) {
      var tr = document.createElement("tr");
      tr.dataset.id = m.id; tr.dataset.servedBy = m.servedBy;
      cell(tr, m.id); cell(tr, m.topic); cell(tr, m.queue, "num"); cell(tr, m.pending ? "delayed" : m.offset, "num"); cell(tr, m.key || ""); cell(tr, m.tag || "");
      cell(tr, clock(m.born)); cell(tr, m.servedBy);
      var b = hex || !m.text ? m.bodyHex.replace(/(..)/g, "$1 ").trim() : m.body;
      cell(tr, b + (m.size > m.bodyHex.length / 2 ? " … (" + m.size + " bytes)" : "") + (!hex && !m.text ? " (not text: hex)" : ""), "body");
      rows.appendChild(tr);
    });
    $("messages").tBodies[0].replaceChildren(rows);
  }
  function lookup(method, path, what) {
    call(method, "GET", path, null, state.addr).then(function (ms) {
      found = ms; renderMessages();
      note("msg-msg", ms.length ? ms.length + " message(s) " + what + "." : "No message " + what + ".", !ms.length);
    }, function (e) { found = []; renderMessages(); note("msg-msg", "Messages " + what + ": " + e.message, true); });
  }
  $("by-id").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var id = $("msg-id").value.trim();
    lookup("/raftmq.v1.Broker/LookupMessage", "/console/api/messages?id=" + encodeURIComponent(id), "with id " + JSON.stringify(id));
  });
  $("by-key").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var t = $("msg-topic").value.trim(), k = $("msg-key").value.trim();
    lookup("/raftmq.v1.Broker/FindMessages", "/console/api/messages?topic=" + encodeURIComponent(t) + "&key=" + encodeURIComponent(k), "of " + JSON.stringify(t) + " with key " + JSON.stringify(k));
  });
  document.querySelectorAll("input[name=body-as]").forEach(function (r) { r.addEventListener("change", renderMessages); });
  show();
  connect(location.host);
  session();
})();
