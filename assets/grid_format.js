// Cell formatters the viewer's grids call by name (dash-ag-grid's function namespace): raw numbers stay in the row
// data, so a column sorts by value and reads as people read bytes.
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});

// Bytes in decimal units, as portscope.ingest.catalog.format_bytes writes them ("5.4 KB"; "-" for none).
dagfuncs.formatBytes = function (value) {
  if (value === null || value === undefined || value === "" || Number.isNaN(Number(value)) || Number(value) === 0) {
    return "-";
  }
  var n = Number(value);
  var units = ["B", "KB", "MB", "GB", "TB"];
  for (var i = 0; i < units.length; i++) {
    if (Math.abs(n) < 1000 || i === units.length - 1) {
      return i === 0 ? n.toFixed(0) + " B" : n.toFixed(1) + " " + units[i];
    }
    n /= 1000;
  }
  return String(value) + " B";
};
