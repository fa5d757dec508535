// claimstore console: polls api/overview every 2 s on the overview page
// and updates the Galera cluster panel, the counts, the facts, the rows in
// flight and the chart; on the jobs page, the box in the list's header
// selects every job shown.
// Values from the database are written with textContent only, never as
// HTML.
"use strict";
(function () {
  var chart = document.getElementById("chart");
  if (!chart) return;
  var SVG = "http://www.w3.org/2000/svg";
  var samples = []; // {t, done, due}
  var WINDOW = 5 * 60 * 1000;

  // text sets the text of el, or of the link it holds (a job table's
  // counts link to its job list).
  function text(el, s) {
    if (el && el.firstElementChild && el.firstElementChild.tagName === "A") el = el.firstElementChild;
    if (el && el.textContent !== s) el.textContent = s;
  }

  function fmt(c) {
    var s = Number(c.n).toLocaleString("en-US");
    if (c.estimate) return "≈ " + s + " (estimate)";
    if (c.atLeast) return s + " or more";
    return s;
  }

  function age(sec) {
    if (!sec || sec <= 0) return "0s";
    sec = Math.round(sec);
    var h = Math.floor(sec / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
    return (h ? h + "h" : "") + (h || m ? m + "m" : "") + s + "s";
  }

  function cell(tr, s) { var td = document.createElement("td"); td.textContent = s; tr.appendChild(td); return td; }

  // cluster updates the Galera cluster panel, when the page has one,
  // from the state api/overview returned.
  function cluster(c) {
    var panel = document.getElementById("cluster");
    if (!panel || !c) return;
    var yes = function (b) { return b ? "yes" : "no"; };
    var shown = {
      localState: c.localState, serving: yes(c.serving), clusterStatus: c.clusterStatus,
      clusterSize: String(c.clusterSize), ready: yes(c.ready), connected: yes(c.connected),
      confId: String(c.confId), flowControlPaused: Number(c.flowControlPaused).toFixed(3),
      certFailures: String(c.certFailures), bfAborts: String(c.bfAborts), members: (c.members || []).join(", ")
    };
    Object.keys(shown).forEach(function (k) { text(panel.querySelector('[data-cluster="' + k + '"]'), shown[k]); });
    var err = panel.querySelector('[data-cluster="error"]');
    if (err) { text(err, c.error || ""); err.hidden = !c.error; }
    panel.classList.toggle("warn", !c.serving);
    var serving = panel.querySelector('[data-cluster="serving"]');
    if (serving) serving.classList.toggle("bad", !c.serving);
    var component = panel.querySelector('[data-cluster="clusterStatus"]');
    if (component) component.classList.toggle("bad", c.clusterStatus !== "Primary");
  }

  function update(data) {
    cluster(data.cluster);
    var done = 0, due = 0;
    data.tables.forEach(function (t) {
      done += t.done ? t.done.n : 0;
      due += t.due ? t.due.n : 0;
      var card = null;
      document.querySelectorAll("section.card[data-table]").forEach(function (c) {
        if (c.getAttribute("data-table") === t.name) card = c;
      });
      if (!card) return;
      (t.counts || []).forEach(function (c) {
        card.querySelectorAll("[data-count]").forEach(function (el) {
          if (el.getAttribute("data-count") === c.status) text(el, fmt(c));
        });
      });
      text(card.querySelector('[data-count="total"]'), fmt(t.total));
      text(card.querySelector('[data-fact="due"]'), fmt(t.due));
      text(card.querySelector('[data-fact="oldest"]'), age(t.oldestDueSeconds));
      text(card.querySelector('[data-fact="failures"]'), fmt(t.failures));
      text(card.querySelector('[data-fact="elapsed"]'), t.elapsedMs.toFixed(1) + " ms");
      var body = card.querySelector("[data-inflight]");
      if (body) {
        while (body.firstChild) body.removeChild(body.firstChild);
        if (!t.inFlight.length) {
          var tr = document.createElement("tr");
          var td = cell(tr, "none"); td.colSpan = 3; td.className = "muted";
          body.appendChild(tr);
        }
        t.inFlight.forEach(function (l) {
          var tr = document.createElement("tr");
          var td = document.createElement("td");
          var a = document.createElement("a");
          a.href = (t.kind === "jobs" ? "job" : "row") + "?t=" + encodeURIComponent(t.name) + "&id=" + encodeURIComponent(l.id);
          a.textContent = l.id;
          td.appendChild(a); tr.appendChild(td);
          cell(tr, l.owner);
          cell(tr, String(l.until).replace("T", " ").replace(/\.\d+/, ""));
          body.appendChild(tr);
        });
      }
    });
    var now = Date.parse(data.at);
    samples.push({ t: now, done: done, due: due });
    while (samples.length && samples[0].t < now - WINDOW) samples.shift();
    draw();
  }

  function line(points, cls, max, t0, span) {
    var p = document.createElementNS(SVG, "polyline");
    p.setAttribute("class", cls);
    p.setAttribute("points", points.map(function (q) {
      return ((q.t - t0) / span * 600).toFixed(1) + "," + (155 - q.v / max * 145).toFixed(1);
    }).join(" "));
    chart.appendChild(p);
  }

  function draw() {
    while (chart.firstChild) chart.removeChild(chart.firstChild);
    if (samples.length < 3) return;
    // The x axis spans the samples kept (at most the last 5 minutes).
    var t0 = samples[1].t, span = Math.max(samples[samples.length - 1].t - t0, 1);
    var rate = [], due = [];
    for (var i = 1; i < samples.length; i++) {
      var a = samples[i - 1], b = samples[i];
      rate.push({ t: b.t, v: Math.max(0, (b.done - a.done) / ((b.t - a.t) / 1000)) });
      due.push({ t: b.t, v: b.due });
    }
    var maxRate = Math.max.apply(null, rate.map(function (q) { return q.v; }).concat([1]));
    var maxDue = Math.max.apply(null, due.map(function (q) { return q.v; }).concat([1]));
    line(rate, "done", maxRate, t0, span);
    line(due, "due", maxDue, t0, span);
    text(document.getElementById("chart-note"),
      "last " + Math.round((samples[samples.length - 1].t - samples[0].t) / 1000) + " s · peak " +
      maxRate.toFixed(1) + "/s done, " + maxDue + " due");
  }

  function poll() {
    fetch("api/overview", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d) update(d); })
      .catch(function () {})
      .then(function () { setTimeout(poll, 2000); });
  }
  poll();
})();

(function () {
  var all = document.getElementById("select-all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll('#jobs-form input[name="id"]').forEach(function (box) { box.checked = all.checked; });
  });
})();
