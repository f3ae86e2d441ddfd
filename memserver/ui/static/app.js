// The memory browser's only script (no library, no build step). The pages work without it; it adds:
//  - live refresh on Search and Browse: /ui/events says the store changed, the list is fetched again and swapped
//    in place (the server's HTML, parsed inert by DOMParser: nothing in it runs);
//  - upload progress on Import / export.
"use strict";

(function () {
  const body = document.body;
  const csrf = body.dataset.csrf || "";

  function swap(fresh, ids) {
    for (const id of ids) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (now && next) {
        now.replaceWith(document.importNode(next, true));
      }
    }
  }

  async function refresh(ids) {
    const answer = await fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!answer.ok) return;
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
    // keep what the person opened: explanations stay open across a refresh
    const open = new Set([...document.querySelectorAll("li.hit details[open]")].map((d) => d.closest("li").dataset.id));
    swap(fresh, ids);
    for (const li of document.querySelectorAll("li.hit")) {
      if (open.has(li.dataset.id)) li.querySelector("details").open = true;
    }
    const status = document.getElementById("live-status");
    if (status) status.textContent = "Updated " + new Date().toLocaleTimeString();
  }

  function live() {
    if (!body.dataset.live || !window.EventSource) return;
    const ids = body.dataset.page === "search" ? ["results", "no-results", "result-count"] : ["memories", "facets", "timeline"];
    const status = document.createElement("p");
    status.id = "live-status";
    status.className = "muted live";
    status.setAttribute("role", "status");
    status.textContent = "Live: new memories appear here.";
    const main = document.getElementById("main");
    main.insertBefore(status, main.firstChild);
    let busy = false;
    let again = false;
    const events = new EventSource("/ui/events");
    events.addEventListener("changed", async () => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        do {
          again = false;
          await refresh(ids);
        } while (again);
      } finally {
        busy = false;
      }
    });
  }

  function uploads() {
    const form = document.getElementById("import-form");
    if (!form || !window.XMLHttpRequest) return;
    form.addEventListener("submit", (event) => {
      const file = form.querySelector("input[type=file]").files[0];
      if (!file) return;
      event.preventDefault();
      const progress = document.getElementById("import-progress");
      const summary = document.getElementById("import-summary");
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      summary.textContent = "Uploading " + file.name + "…";
      const request = new XMLHttpRequest();
      request.open("POST", form.action);
      request.setRequestHeader("X-CSRF-Token", csrf);
      request.setRequestHeader("Content-Type", "application/x-ndjson");
      request.upload.addEventListener("progress", (e) => {
        if (e.lengthComputable) progress.value = Math.round((100 * e.loaded) / e.total);
      });
      request.upload.addEventListener("load", () => {
        progress.value = 100;
        summary.textContent = "Importing…";
      });
      request.addEventListener("load", () => {
        button.disabled = false;
        const fresh = new DOMParser().parseFromString(request.responseText, "text/html");
        const next = fresh.getElementById("import-summary");
        if (next) {
          summary.replaceWith(document.importNode(next, true));
        } else {
          summary.textContent = request.status + ": " + request.responseText.slice(0, 300);
        }
      });
      request.addEventListener("error", () => {
        button.disabled = false;
        summary.textContent = "The upload failed; nothing may have been imported. Try again.";
      });
      request.send(file);
    });
  }

  live();
  uploads();
})();
