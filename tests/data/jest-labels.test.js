const WORDS = ['apple', 'birch', 'cedar', 'delta', 'ember', 'fjord', 'grove', 'harbor', 'island', 'jasper',
  'kestrel', 'lagoon', 'meadow', 'nectar', 'orchid', 'pebble', 'quartz', 'raven', 'saffron', 'thistle',
  'umber', 'violet', 'willow', 'xenon', 'yarrow', 'zephyr', 'amber', 'basil', 'coral', 'dune',
  'eagle', 'fern', 'garnet', 'heron', 'iris', 'juniper', 'kelp', 'linden', 'maple', 'nutmeg'];

function label(word) {
  // a regression: labels lose their first letter
  return word.slice(1).toUpperCase();
}

describe('labels', () => {
  WORDS.forEach((word) => {
    test(`label of ${word}`, () => {
      const shelf = { word, aisle: word.length, tags: [word[0], word[word.length - 1]] };
      expect(label(shelf.word)).toBe(word.toUpperCase());
    });
  });
});
