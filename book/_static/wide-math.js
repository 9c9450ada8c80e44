/* Inline formulas wider than their column. MathJax 3 does not break inline math, so on a
   phone a long formula in running text ran past the column and was cut. Such a formula (and
   only such a one: a formula that fits keeps its place in the line and its baseline) becomes a
   box as wide as the column that scrolls sideways, with the fading right edge of custom.css as
   the cue. Measured after MathJax has typeset the page, and again when the window's width
   changes. The number of formulas changed is left on <html data-afw-wide-math> for the checks
   (absent while a measurement is pending), and the window width it was measured at on
   data-afw-wide-math-width. */
(function () {
  "use strict";
  var WIDE = "afw-wide-math";

  function column(el) {          // the block that holds the formula's line
    var box = el.parentElement;
    while (box && getComputedStyle(box).display.indexOf("inline") === 0) box = box.parentElement;
    return box;
  }

  function mark() {
    var formulas = document.querySelectorAll('.bd-article mjx-container:not([display="true"])');
    var k, wide = [];
    for (k = 0; k < formulas.length; k++) formulas[k].classList.remove(WIDE);
    for (k = 0; k < formulas.length; k++) {     // measure every formula first, then change
      var f = formulas[k], box = column(f);
      if (!box || !f.getClientRects().length) continue;
      var style = getComputedStyle(box);
      var room = box.getBoundingClientRect().right - parseFloat(style.borderRightWidth) - parseFloat(style.paddingRight);
      if (f.getBoundingClientRect().right > room + 1) wide.push(f);
    }
    for (k = 0; k < wide.length; k++) wide[k].classList.add(WIDE);
    document.documentElement.setAttribute("data-afw-wide-math", String(wide.length));
    document.documentElement.setAttribute("data-afw-wide-math-width", String(window.innerWidth));
  }

  var width = -1, pending = 0;
  function resized() {          // measured once per frame, however many resize events it had
    if (window.innerWidth === width) return;
    width = window.innerWidth;
    document.documentElement.removeAttribute("data-afw-wide-math");   // until measured again
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(mark);
  }

  function start(tries) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(function () {
        width = window.innerWidth;
        mark();
        window.addEventListener("resize", resized);
      });
    } else if (tries > 0) {
      setTimeout(function () { start(tries - 1); }, 50);
    }
  }
  start(400);   // MathJax loads asynchronously: wait for it up to 20 s
})();
