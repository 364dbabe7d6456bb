// The chat panel (hub/http/dashboard/_chat.py): sends a message without leaving the page and
// draws the reply as the model writes it, from the conversation's run events (Server-Sent
// Events on /ui/chat/events: output_partial, then output, then run_ended). Text only: every
// string goes in as textContent, never as markup.
(function () {
  "use strict";
  var panel = document.getElementById("chat");
  if (!panel || !window.EventSource || !window.fetch) return; // the form still posts, the page reloads
  var log = document.getElementById("chat-log");
  var form = document.getElementById("chat-form");
  var box = document.getElementById("chat-text");
  var status = document.getElementById("chat-status");

  function line(role, id, text) {
    var el = id ? document.getElementById(id) : null;
    if (!el) {
      var empty = document.getElementById("chat-empty");
      if (empty) empty.remove();
      el = document.createElement("li");
      el.className = "line " + role;
      if (id) el.id = id;
      log.appendChild(el);
    }
    if (text !== null) el.textContent = text;
    el.scrollIntoView({ block: "nearest" });
    return el;
  }
  function text(content) {
    return typeof content === "string" ? content : JSON.stringify(content);
  }

  var events = new EventSource(panel.dataset.events);
  events.addEventListener("input", function (e) {
    var d = JSON.parse(e.data);
    line("user", "in-" + d.entry.id, text(d.entry.content));
    status.textContent = "The bot is answering…";
  });
  events.addEventListener("output_partial", function (e) {
    var d = JSON.parse(e.data);
    var el = line("bot streaming", "out-" + d.output_id, null);
    el.textContent += d.text;
  });
  events.addEventListener("output", function (e) {
    var d = JSON.parse(e.data), entry = d.entry;
    if (!entry.sent && !entry.error) return; // still being written: the partials draw it
    var el = line("bot", "out-" + entry.id, entry.sent ? text(entry.content) : "not sent: " + entry.error);
    el.classList.remove("streaming");
  });
  events.addEventListener("run_ended", function (e) {
    var d = JSON.parse(e.data);
    status.textContent = "";
    if (d.state !== "completed") {
      line("note", "end-" + d.run_id, "run " + d.state + (d.reason ? ": " + d.reason : ""));
    }
  });
  events.onerror = function () {
    status.textContent = "The live stream was interrupted; reconnecting…";
  };
  events.onopen = function () {
    if (status.textContent.indexOf("interrupted") >= 0) status.textContent = "";
  };

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var message = box.value.trim();
    if (!message) return;
    var body = new URLSearchParams(new FormData(form)); // urlencoded, as the page's forms post
    box.value = "";
    status.textContent = "Sending…";
    fetch(form.action, { method: "POST", body: body, headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (resp) {
        return resp.json().then(function (d) {
          if (!resp.ok) {
            box.value = message; // nothing is lost
            status.textContent = d.error || "not sent (" + resp.status + ")";
          } else if (status.textContent === "Sending…") {
            status.textContent = "Sent; waiting for the bot…";
          }
        });
      })
      .catch(function () {
        box.value = message;
        status.textContent = "not sent: the dashboard could not be reached";
      });
  });
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
})();
