/* portscope timelines: Perfetto's keys. W/S zoom in/out around the centre of the view, A/D pan left/right.
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
      width = key === "w" ? width * ZOOM : width / ZOOM;
      x0 = centre - width / 2;
      x1 = centre + width / 2;
    } else {
      var shift = (key === "d" ? 1 : -1) * width * PAN;
      x0 += shift;
      x1 += shift;
    }
    event.preventDefault();
    window.Plotly.relayout(gd, { "xaxis.range": [x0, x1] });
  });
})();
