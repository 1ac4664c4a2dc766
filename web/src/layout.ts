// The page's frame: the sidebar, which slides over the conversation on a narrow screen,
// and the settings in it (the API key, kept in this browser only).

import { byId } from "./dom";
import { t } from "./i18n";
import * as store from "./store";

export class Layout {
  private readonly app = byId<HTMLDivElement>("app");
  private readonly scrim = byId<HTMLDivElement>("scrim");
  private readonly opener = byId<HTMLButtonElement>("open-sidebar");
  private readonly settings = byId<HTMLDetailsElement>("settings");
  private readonly apiKey = byId<HTMLInputElement>("api-key");

  /** `saved`: the API key changed, so the page starts over with it. */
  constructor(saved: () => void) {
    this.opener.addEventListener("click", () => this.openSidebar());
    byId("close-sidebar").addEventListener("click", () => this.closeSidebar());
    this.scrim.addEventListener("click", () => this.closeSidebar());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.app.classList.contains("sidebar-open")) this.closeSidebar();
    });
    this.apiKey.value = store.apiKey.get();
    const savedNote = byId<HTMLSpanElement>("settings-saved");
    byId<HTMLFormElement>("settings-form").addEventListener("submit", (event) => {
      event.preventDefault();
      store.apiKey.set(this.apiKey.value);
      savedNote.textContent = t.saved;
      window.setTimeout(() => (savedNote.textContent = ""), 2000);
      this.closeSidebar();
      saved();
    });
  }

  /** The settings, open at the API key (for a refused key). */
  openSettings(): void {
    if (this.app.clientWidth < 860) this.openSidebar();
    this.settings.open = true;
    this.apiKey.focus();
  }

  openSidebar(): void {
    this.app.classList.add("sidebar-open");
    this.scrim.hidden = false;
    this.opener.setAttribute("aria-expanded", "true");
  }

  closeSidebar(): void {
    this.app.classList.remove("sidebar-open");
    this.scrim.hidden = true;
    this.opener.setAttribute("aria-expanded", "false");
  }
}
