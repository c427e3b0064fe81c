/* portscope timelines: Perfetto's keys. W/S zoom in/out around the mouse (the centre of the view when the
 * mouse is not over the lanes), A/D pan left/right.
 * The keys relayout the graph; the server answers the relayout (bars, ticks, labels) as for any zoom.
 * Keys typed into a text box are left alone. */
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
})();
