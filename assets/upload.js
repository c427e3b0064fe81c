/* portscope uploads: drag and drop anywhere (or click the upload zone), several files at once.
 * Each file is POSTed raw to /api/upload (streamed to disk by the server, not base64 in memory);
 * progress goes to the <progress> bar (hidden until the first upload), results to the upload-result store via
 * set_props.
 * A large file of another format is converted in the background: the server answers with a job,
 * polled at GET /api/upload/<job> until it names the run (its progress shown meanwhile).
 * Several per-rank traces dropped at once (every name a .json/.json.gz with a rank in it: rank0.json,
 * trace_rank-1.json.gz...) go in one multipart request to /api/upload/ranks: one multi-rank run. A .zip of
 * rank files goes to /api/upload as any file (the server recognises it). */
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

  var RANK_NAME = /rank[-_]?\d+.*\.json(\.gz)?$/i;

  function isRankDrop(files) {
    return files.length > 1 && files.every(function (f) { return RANK_NAME.test(f.name); });
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
    if (isRankDrop(files)) {
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
      return;
    }
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
