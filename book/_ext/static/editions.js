// On a narrow screen the chapter list and the page's contents open as a drawer (a modal
// <dialog> of the theme). A link to a section of this page leaves that drawer open over
// the text it scrolled to; close it, so the reader sees where the link went.
// (tests/test_navigation.py taps a section link on a phone.)
document.addEventListener("click", (event) => {
  const link = event.target.closest("dialog[open] a[href]");
  if (!link) return;
  const target = new URL(link.href, document.baseURI);
  const here = new URL(document.baseURI);
  if (target.pathname === here.pathname && target.hash) {
    link.closest("dialog").close();
  }
});
