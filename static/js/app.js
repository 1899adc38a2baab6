// The site's own script (no inline scripts: the Content-Security-Policy allows none).
// A plain form with data-confirm="question?" asks before it is sent, as hx-confirm does
// for htmx requests.
document.addEventListener("submit", (event) => {
  const question = event.target.closest("form[data-confirm]")?.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

// A followed log shows its newest lines: each log swapped in by htmx is scrolled to its end.
document.addEventListener("htmx:afterSettle", (event) => {
  for (const log of event.target.querySelectorAll("pre[data-scroll-end]")) {
    log.scrollTop = log.scrollHeight;
  }
});
