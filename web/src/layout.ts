// The page's frame: the sidebar, which slides over the conversation on a narrow screen.

import { byId } from "./dom";

export class Layout {
  private readonly app = byId<HTMLDivElement>("app");
  private readonly scrim = byId<HTMLDivElement>("scrim");
  private readonly opener = byId<HTMLButtonElement>("open-sidebar");

  constructor() {
    this.opener.addEventListener("click", () => this.openSidebar());
    byId("close-sidebar").addEventListener("click", () => this.closeSidebar());
    this.scrim.addEventListener("click", () => this.closeSidebar());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.app.classList.contains("sidebar-open")) this.closeSidebar();
    });
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
