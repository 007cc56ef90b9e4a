// Keeps a scrolling list at its end while new output arrives, unless the reader scrolled
// up to read something earlier; a button then offers the way back to the end.

// Within this many pixels of the end counts as at the end (a wheel step, rounding).
const slack = 40;

export class Follower {
  private following = true;

  constructor(
    private readonly list: HTMLElement,
    private readonly jump: HTMLButtonElement,
  ) {
    // Only the reader moves the list away from its end: scrolls this class makes land on
    // the end, so they keep following.
    list.addEventListener("scroll", () => {
      this.following = this.atEnd();
      if (this.following) this.jump.hidden = true;
    });
    jump.addEventListener("click", () => this.toEnd());
    jump.hidden = true;
  }

  private atEnd(): boolean {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight <= slack;
  }

  /** Follows again and shows the end (a session was opened, the reader asked). */
  toEnd(): void {
    this.following = true;
    this.jump.hidden = true;
    this.list.scrollTop = this.list.scrollHeight;
  }

  /** New output arrived: follow it, or say that it is there. */
  grew(): void {
    if (this.following) {
      this.list.scrollTop = this.list.scrollHeight;
    } else if (!this.atEnd()) {
      this.jump.hidden = false;
    }
  }
}
