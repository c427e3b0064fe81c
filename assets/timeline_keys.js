/* portscope timelines: Perfetto's keys. W/S zoom in/out around the mouse (the centre of the view when the
 * mouse is not over the lanes), A/D pan left/right.
 * The keys relayout the graph; the server answers the relayout (bars, ticks, labels) as for any zoom.
 * Keys typed into a text box are left alone.
 * The timeline page's zoom and the range dragged over are kept in its URL (below). */
(function () {
  "use strict";
  var GRAPHS = ["timeline-graph", "compare-timelines"];
  var ZOOM = 0.8; // W: the view becomes 80 % as wide; S: 1 / 0.8
  var PAN = 0.2; // A/D: a fifth of the view

  function plot() {
    for (var i = 0; i < GRAPHS.length; i++) {
      var el = document.getElementById(GRAPHS[i]);
      var gd = el && el.querySelector(".js-plotly-plot");
      if (gd && gd._fullLayout && gd._fullLayout.xaxis) {
        return gd;
      }
    }
    return null;
  }

  var anchor = null; // the time under the mouse, while it is over a timeline's lanes

  document.addEventListener("mousemove", function (event) {
    var gd = plot();
    var drag = gd && gd.querySelector(".nsewdrag");
    var xa = gd && gd._fullLayout.xaxis;
    if (!drag || !xa || !xa.p2c) {
      anchor = null;
      return;
    }
    var box = drag.getBoundingClientRect();
    var inside = event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
    anchor = inside ? xa.p2c(event.clientX - box.left) : null;
  });

  document.addEventListener("keydown", function (event) {
    var tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    var key = (event.key || "").toLowerCase();
    if ("wsad".indexOf(key) < 0 || key === "") {
      return;
    }
    var gd = plot();
    if (!gd || !window.Plotly) {
      return;
    }
    var range = gd._fullLayout.xaxis.range;
    var x0 = Number(range[0]);
    var x1 = Number(range[1]);
    var width = x1 - x0;
    var centre = (x0 + x1) / 2;
    if (key === "w" || key === "s") {
      var f = key === "w" ? ZOOM : 1 / ZOOM;
      var at = anchor !== null && anchor >= x0 && anchor <= x1 ? anchor : centre; // the point that stays put
      x0 = at - (at - x0) * f;
      x1 = at + (x1 - at) * f;
    } else {
      var shift = (key === "d" ? 1 : -1) * width * PAN;
      x0 += shift;
      x1 += shift;
    }
    event.preventDefault();
    window.Plotly.relayout(gd, { "xaxis.range": [x0, x1] });
  });

  /* The timeline page's view in its URL, so a zoomed view (and a range dragged over) can be bookmarked and shared:
   * ?view=x0,x1 (the zoom) and &range=x0,x1 (the selection), in the axis unit; app/pages/timeline.py opens the page
   * on them. Written with history.replaceState: a zoom does not add a history entry (nor re-render the page). */
  var URL_GRAPH = "timeline-graph";

  function number(value) {
    return String(Number(Number(value).toPrecision(12)));
  }

  function setParam(name, pair) {
    var url = new URL(window.location.href);
    if (pair) {
      url.searchParams.set(name, number(Math.min(pair[0], pair[1])) + "," + number(Math.max(pair[0], pair[1])));
    } else {
      url.searchParams.delete(name);
    }
    var search = url.searchParams.toString().replace(/%2C/g, ",");
    var next = url.pathname + (search ? "?" + search : "") + url.hash;
    if (next !== window.location.pathname + window.location.search + window.location.hash) {
      window.history.replaceState(window.history.state, "", next);
    }
  }

  function selectedRange(range) {
    // a selection's x range: its first x axis ("x", or "x2" ... on a panel below)
    for (var key in range || {}) {
      var value = range[key];
      if (/^x\d*$/.test(key) && value && value.length === 2 && isFinite(value[0]) && isFinite(value[1])) {
        return [Number(value[0]), Number(value[1])];
      }
    }
    return null;
  }

  function watch(gd) {
    var known = null; // the view last seen: the first is the one the page opened on (already in its URL)
    function sync() {
      var xa = gd._fullLayout && gd._fullLayout.xaxis;
      if (!xa || !xa.range || !document.body.contains(gd)) {
        return;
      }
      var view = xa.autorange ? "whole" : number(xa.range[0]) + "," + number(xa.range[1]);
      if (known !== null && view !== known) {
        setParam("view", xa.autorange ? null : xa.range); // autoscaled: the whole run, no view
      }
      known = view;
    }
    // a key, the wheel or a drag relayouts the graph; a step to a search match sets its range from the server
    gd.on("plotly_relayout", sync);
    gd.on("plotly_afterplot", sync);
    gd.on("plotly_selected", function (selected) {
      var range = selected && selectedRange(selected.range);
      if (range && document.body.contains(gd)) {
        setParam("range", range);
      }
    });
    gd.on("plotly_deselect", function () {
      if (document.body.contains(gd)) {
        setParam("range", null);
      }
    });
    sync();
  }

  var watched = null;
  window.setInterval(function () {
    // the page's graph is re-created when the page is opened again: watch the one shown
    var el = document.getElementById(URL_GRAPH);
    var gd = el && el.querySelector(".js-plotly-plot");
    if (gd && gd.on && gd !== watched) {
      watched = gd;
      watch(gd);
    }
  }, 250);
})();
