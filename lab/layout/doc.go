// Package layout holds the tests that keep the repository's house in
// order: what the product links, which way imports run, the README's map of
// folders, and the links between the README and docs/. It has no code of
// its own; nothing imports it.
package layout
