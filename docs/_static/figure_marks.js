// Marks each figure of the page once it has loaded: whether it loaded, its natural and
// shown widths (tests/test_docs_pages.py reads the marks in headless Chromium and the
// figure's smallest text height from the PNG to check it is legible as shown).
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images), bad = 0;
  imgs.forEach(function (im) {
    var ok = im.complete && im.naturalWidth > 0;
    im.setAttribute('data-loaded', ok ? 'yes' : 'no');
    im.setAttribute('data-natural-width', im.naturalWidth);
    im.setAttribute('data-shown-width', im.width);
    if (!ok) bad += 1;
  });
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-broken', bad);
});
