// Browser notifications when something waits for the person (a permission, a form)
// while the page's tab is hidden. Asked for only when the person clicks the button: a
// browser ignores or blocks a request the page makes on its own.
import { byId } from "./dom.js";

const button = byId<HTMLButtonElement>("notify-enable");

function supported(): boolean {
  return "Notification" in window;
}

function render(): void {
  button.hidden = !supported() || Notification.permission !== "default";
  button.dataset.permission = supported() ? Notification.permission : "unsupported";
}

button.addEventListener("click", () => {
  void Notification.requestPermission().then(render, render);
});
render();

/** Tells the person, if the tab is hidden and they agreed; click opens the page there. */
export function notifyWaiting(title: string, body: string, tag: string, open: () => void): void {
  render();
  if (!supported() || Notification.permission !== "granted" || document.visibilityState !== "hidden") return;
  const n = new Notification(title, { body, tag });
  n.addEventListener("click", () => {
    window.focus();
    open();
    n.close();
  });
}
