// Package webui holds the browser test of Courier's review desk in the
// Temporal web UI; lab only, nothing imports it. A headless Chromium drives
// the web UI server `courier-lab dev` serves (Courier's UI settings, over the dev stack's Temporal dev
// server, `courier worker` process and sandbox destinations) and decides a
// parked delivery the way an operator would: the list filtered by
// CourierState, with Courier's search attributes added as columns through
// the UI's column chooser; the delivery's current details (why it waits,
// the update template); More Actions → Send an Update with the update
// `review`. It then checks the list and the delivery's status query agree
// that the decision was taken, by whom and through which path.
//
// The test needs Chromium (Debian's `chromium`) and skips without it. It
// writes a screenshot of each step to COURIER_SCREENSHOTS when that is set.
package webui
