// The status page's refresh (issue 49.8). A page still changing (its <body> carries
// data-refresh, in seconds) fetches itself again every so often and puts the fresh content
// of each [data-live-region] in place of its own, without reloading: a <details> the reader
// opened stays open (matched by its summary's words), the scroll stays where it was. It stops
// once the fetched page says it is final (no data-refresh: the update is terminal). What the
// reader typed in a form on it (the updates list's filters) and the focus stay too.
// No inline script, no eval, nothing from the page run: DOMParser's documents run no script,
// and the page's Content-Security-Policy allows scripts and fetches from this origin only.
(function () {
  "use strict";
  var body = document.body;
  var seconds = Number(body.getAttribute("data-refresh"));
  if (!seconds || !window.fetch || !window.DOMParser) {
    return;
  }
  var every = Number(window.PROMPTGATE_POLL_MS) || seconds * 1000; // (a browser test sets it first)
  var polls = 0;

  function opened(region) {
    var keys = {};
    region.querySelectorAll("details[open] > summary").forEach(function (s) {
      keys[s.textContent.trim()] = true;
    });
    return keys;
  }

  function reopen(region, keys) {
    region.querySelectorAll("details > summary").forEach(function (s) {
      if (keys[s.textContent.trim()]) {
        s.parentNode.open = true;
      }
    });
  }

  function twin(copy, field) {
    var found = null;
    copy.querySelectorAll(field.tagName + "[name]").forEach(function (candidate) {
      if (candidate.getAttribute("name") === field.getAttribute("name")) {
        found = candidate;
      }
    });
    return found;
  }

  function keepFields(old, copy) {
    // what the reader typed or chose in a form (the updates list's filters) stays, and so does the focus
    var focused = document.activeElement;
    var refocus = null;
    old.querySelectorAll("input[name], select[name], textarea[name]").forEach(function (field) {
      var other = twin(copy, field);
      if (!other) {
        return;
      }
      other.value = field.value;
      if (field === focused) {
        refocus = { field: other, start: field.selectionStart, end: field.selectionEnd };
      }
    });
    return refocus;
  }

  function swap(fresh) {
    document.querySelectorAll("[data-live-region]").forEach(function (old) {
      var name = old.getAttribute("data-live-region");
      var found = null;
      fresh.querySelectorAll("[data-live-region]").forEach(function (candidate) {
        if (candidate.getAttribute("data-live-region") === name) {
          found = candidate;
        }
      });
      if (!found) {
        return;
      }
      var keys = opened(old);
      var copy = document.importNode(found, true);
      reopen(copy, keys);
      var refocus = keepFields(old, copy);
      old.replaceWith(copy);
      if (refocus) {
        refocus.field.focus();
        if (typeof refocus.start === "number" && refocus.field.setSelectionRange) {
          refocus.field.setSelectionRange(refocus.start, refocus.end);
        }
      }
    });
    if (fresh.title) {
      document.title = fresh.title;
    }
  }

  function counted(state) {
    body.setAttribute("data-polls", String(polls));
    body.setAttribute("data-poll", state);
  }

  function schedule() {
    counted("waiting");
    window.setTimeout(poll, every);
  }

  function poll() {
    polls += 1;
    counted("fetching");
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (answer) {
        if (!answer.ok) {
          throw new Error("HTTP " + answer.status);
        }
        return answer.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        swap(fresh);
        if (fresh.body && fresh.body.getAttribute("data-refresh")) {
          schedule();
        } else {
          body.removeAttribute("data-refresh");
          counted("stopped"); // final: nothing more will change
        }
      })
      .catch(function () {
        schedule(); // the server restarting, a network blip: try again at the next turn
      });
  }

  schedule();
})();
