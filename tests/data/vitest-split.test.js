import { describe, expect, test } from 'vitest';

// A regression: words are split one letter too late.
function splitWords(text) {
  const words = [];
  let start = 0;
  for (let i = 1; i < text.length; i++) {
    if (text[i] === ' ' && i + 1 < text.length) {
      words.push(text.slice(start, i + 1).trim());
      start = i + 1;
    }
  }
  words.push(text.slice(start));
  return words.map((word) => word.replace(/^\s+/, ''));
}

const PHRASES = [
  'amber basil coral', 'delta ember fjord', 'grove harbor island', 'jasper kestrel lagoon',
  'meadow nectar orchid', 'pebble quartz raven', 'saffron thistle umber', 'violet willow xenon',
  'yarrow zephyr amber', 'birch cedar dune', 'eagle fern garnet', 'heron iris juniper',
  'kelp linden maple', 'nutmeg olive pine', 'quince rowan sage', 'tansy ulmus vetch',
  'wren yew zinnia', 'acorn bramble clover', 'daisy elder foxglove', 'gorse hazel ivy',
];

describe('splitWords', () => {
  PHRASES.forEach((phrase) => {
    test(`splits ${phrase}`, () => {
      expect(splitWords(phrase.replace(/ /g, '  '))).toMatchObject(phrase.split(' '));
    });
  });
});
