/* portscope uploads: drag and drop anywhere (or click the upload zone), several files at once.
 * Each file is POSTed raw to /api/upload (streamed to disk by the server, not base64 in memory);
 * progress goes to the <progress> bar (hidden until the first upload), results to the upload-result store via
 * set_props.
 * A large file of another format is converted in the background: the server answers with a job,
 * polled at GET /api/upload/<job> until it names the run (its progress shown meanwhile).
 * Several per-rank traces dropped at once go in one multipart request to /api/upload/ranks: one multi-rank run.
 * A file is a rank's when its head (the first MB, unpacked for .json.gz) holds the PyTorch profiler's
 * distributedInfo with a rank (and a world size other than 1), else when its name has a rank in it (rank0.json,
 * trace_rank-1.json.gz...); a drop is a run's ranks when every file is a .json/.json.gz rank of its own, no rank
 * twice. A .zip of rank files goes to /api/upload as any file (the server recognises it). */
(function () {
  "use strict";
  var ZONE = "upload-zone";
  var input = null;

  function prefix() {
    try {
      var cfg = JSON.parse(document.getElementById("_dash-config").textContent);
      return cfg.requests_pathname_prefix || "/";
    } catch (e) {
      return "/";
    }
  }

  function setProps(id, props) {
    if (window.dash_clientside && window.dash_clientside.set_props) {
      window.dash_clientside.set_props(id, props);
    }
  }

  function limit() {
    var zone = document.getElementById(ZONE);
    var n = zone ? parseInt(zone.getAttribute("data-max-bytes"), 10) : NaN;
    return isNaN(n) ? Infinity : n;
  }

  function mb(n) {
    return (n / 1e6).toFixed(1) + " MB";
  }

  function follow(file, job, onConverting) {
    return new Promise(function (resolve) {
      function poll() {
        var xhr = new XMLHttpRequest();
        xhr.open("GET", prefix() + "api/upload/" + encodeURIComponent(job));
        xhr.onload = function () {
          var status = null;
          try { status = JSON.parse(xhr.responseText); } catch (e) { status = null; }
          if (!status || xhr.status !== 200) {
            resolve({file: file.name, ok: false, error: file.name + ": the conversion's status is gone (server restarted?)"});
          } else if (status.ok === true && status.run_id) {
            resolve({file: file.name, ok: true, run_id: status.run_id, bytes: file.size});
          } else if (status.ok === false) {
            resolve({file: file.name, ok: false, error: status.error});
          } else {
            onConverting(status);
            window.setTimeout(poll, 500);
          }
        };
        xhr.onerror = function () { window.setTimeout(poll, 2000); };
        xhr.send();
      }
      poll();
    });
  }

  /* POST `body` to `url`; `file` ({name, size}) names the upload in the answer and in errors. */
  function post(url, body, file, contentType, onProgress, onConverting) {
    return new Promise(function (resolve) {
      if (file.size > limit()) {
        resolve({file: file.name, ok: false,
                 error: file.name + " is " + mb(file.size) + "; this viewer accepts files up to " + mb(limit()) +
                        " (start it with --max-upload-mb to change that)"});
        return;
      }
      var xhr = new XMLHttpRequest();
      xhr.open("POST", prefix() + url);
      xhr.setRequestHeader("X-Portscope-Upload", "1");
      if (contentType) { xhr.setRequestHeader("Content-Type", contentType); }
      xhr.upload.onprogress = function (e) { onProgress(e.loaded); };
      xhr.onload = function () {
        var answer;
        try {
          answer = JSON.parse(xhr.responseText);
        } catch (e) {
          answer = {file: file.name, ok: false, error: file.name + ": the server answered " + xhr.status + " " + xhr.statusText};
        }
        resolve(answer.job ? follow(file, answer.job, onConverting) : answer);
      };
      xhr.onerror = function () {
        resolve({file: file.name, ok: false, error: file.name + ": the upload failed (connection lost)"});
      };
      xhr.send(body);
    });
  }

  function uploadOne(file, onProgress, onConverting) {
    return post("api/upload?name=" + encodeURIComponent(file.name), file, file, "application/octet-stream",
                onProgress, onConverting);
  }

  var TRACE_NAME = /\.json(\.gz)?$/i;
  var RANK_NAME = /rank[-_]?(\d+)/i;
  var HEAD_BYTES = 1 << 20;  /* a Kineto export writes distributedInfo at its head, before its events */
  var DISTRIBUTED = /"distributedInfo"\s*:\s*\{([^{}]*)/;

  /* The first HEAD_BYTES of a file as text (unpacked when .gz; "" when it cannot be read). */
  function headText(file) {
    if (!/\.gz$/i.test(file.name)) {
      return file.slice(0, HEAD_BYTES).text().catch(function () { return ""; });
    }
    if (typeof DecompressionStream === "undefined" || !file.stream) { return Promise.resolve(""); }
    var reader = file.stream().pipeThrough(new DecompressionStream("gzip")).getReader();
    var parts = [], got = 0;
    function more() {
      return reader.read().then(function (r) {
        if (!r.done) { parts.push(r.value); got += r.value.length; }
        if (r.done || got >= HEAD_BYTES) {
          if (!r.done) { reader.cancel().catch(function () {}); }
          return new Blob(parts).text();
        }
        return more();
      });
    }
    return more().catch(function () { return new Blob(parts).text(); });
  }

  /* A trace file's rank ({rank, world}) from its distributedInfo, else from its name; null: none. */
  function rankOf(file) {
    if (!TRACE_NAME.test(file.name)) { return Promise.resolve(null); }
    return headText(file).then(function (text) {
      var info = DISTRIBUTED.exec(text);
      var rank = info && /"rank"\s*:\s*(\d+)/.exec(info[1]);
      if (rank) {
        var world = /"world_size"\s*:\s*(\d+)/.exec(info[1]);
        return {rank: parseInt(rank[1], 10), world: world ? parseInt(world[1], 10) : null};
      }
      var named = RANK_NAME.exec(file.name);
      return named ? {rank: parseInt(named[1], 10), world: null} : null;
    });
  }

  /* Whether the dropped files are the ranks of one run (a promise). */
  function isRankDrop(files) {
    if (files.length < 2) { return Promise.resolve(false); }
    return Promise.all(files.map(rankOf)).then(function (ranks) {
      var seen = {};
      return ranks.every(function (r) {
        if (!r || r.world === 1 || seen[r.rank]) { return false; }
        seen[r.rank] = true;
        return true;
      });
    });
  }

  /* Several rank files in one multipart request (the browser sets its Content-Type): one multi-rank run. */
  function uploadRanks(files, onProgress, onConverting) {
    var total = 0;
    var form = new FormData();
    files.forEach(function (f) { total += f.size; form.append("file", f, f.name); });
    return post("api/upload/ranks", form, {name: files.length + " rank files", size: total}, null,
                onProgress, onConverting);
  }

  function upload(files) {
    if (!files.length) { return; }
    isRankDrop(files).then(function (ranked) {
      if (ranked) { uploadRankDrop(files); } else { uploadEach(files); }
    });
  }

  function uploadRankDrop(files) {
    var total = 0;
    files.forEach(function (f) { total += f.size; });
    setProps("upload-progress", {value: "0", hidden: false});
    setProps("upload-status", {children: "uploading " + files.length + " rank files (one multi-rank run)"});
    uploadRanks(files, function (loaded) {
      setProps("upload-progress", {value: String(Math.round(100 * loaded / Math.max(total, 1)))});
    }, function (status) {
      setProps("upload-status", {children: status.text});
      setProps("upload-progress", {value: String(Math.round(100 * (status.fraction || 0)))});
    }).then(function (answer) {
      setProps("upload-progress", {value: "100"});
      setProps("upload-status", {children: answer.ok ? "1 loaded" : "0 loaded, 1 failed"});
      setProps("upload-result", {data: {results: [answer], at: Date.now()}});
    });
  }

  function uploadEach(files) {
    var total = 0, done = 0, results = [];
    files.forEach(function (f) { total += f.size; });
    setProps("upload-progress", {value: "0", hidden: false});
    var chain = Promise.resolve();
    files.forEach(function (file, i) {
      chain = chain.then(function () {
        var which = "uploading " + file.name + " (" + (i + 1) + " of " + files.length + ")";
        setProps("upload-status", {children: which});
        return uploadOne(file, function (loaded) {
          setProps("upload-progress", {value: String(Math.round(100 * (done + loaded) / Math.max(total, 1)))});
          setProps("upload-status", {children: which + ": " + mb(loaded) + " of " + mb(file.size) + " sent"});
        }, function (status) {
          setProps("upload-status", {children: status.text});
          setProps("upload-progress", {value: String(Math.round(100 * (status.fraction || 0)))});
        }).then(function (answer) {
          done += file.size;
          results.push(answer);
        });
      });
    });
    chain.then(function () {
      var bad = results.filter(function (r) { return !r.ok; }).length;
      setProps("upload-progress", {value: "100"});
      setProps("upload-status", {children: (results.length - bad) + " loaded" + (bad ? ", " + bad + " failed" : "")});
      setProps("upload-result", {data: {results: results, at: Date.now()}});
    });
  }

  function fileInput() {
    if (!input) {
      input = document.createElement("input");
      input.type = "file";
      input.multiple = true;
      input.id = "upload-file-input";
      input.style.display = "none";
      input.addEventListener("change", function () {
        upload(Array.prototype.slice.call(input.files));
        input.value = "";
      });
      document.body.appendChild(input);
    }
    return input;
  }

  function zoneOf(target) {
    return target && target.closest ? target.closest("#" + ZONE) : null;
  }

  function init() {
    fileInput();
    document.addEventListener("click", function (e) {
      if (zoneOf(e.target)) { fileInput().click(); }
    });
    document.addEventListener("dragover", function (e) {
      if (e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types, "Files") >= 0) {
        e.preventDefault();
        var zone = document.getElementById(ZONE);
        if (zone) { zone.classList.add("dragging"); }
      }
    });
    document.addEventListener("dragleave", function (e) {
      var zone = document.getElementById(ZONE);
      if (zone && !e.relatedTarget) { zone.classList.remove("dragging"); }
    });
    document.addEventListener("drop", function (e) {
      if (!e.dataTransfer || !e.dataTransfer.files.length) { return; }
      e.preventDefault();
      var zone = document.getElementById(ZONE);
      if (zone) { zone.classList.remove("dragging"); }
      upload(Array.prototype.slice.call(e.dataTransfer.files));
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
