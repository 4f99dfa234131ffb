package gate

// The gate workflow's workflow.GetVersion markers (the Delivery's are in
// package workflows); each is asked once, as a run starts.

// versionGateTerms marks gates that take their breaker and who may pause or
// resume them from the workers' destinations file, recorded in history by
// ResolveTerms, and whose resume also closes an open breaker. Runs from
// before keep deciding from the reports' breaker.
const versionGateTerms = "gate-terms"

// versionGateMemo marks gates that publish their memo whenever what they
// hold changes (a report, the breaker's count), not only on a transition:
// readers read the memo alone, so it answers as the running gate would.
const versionGateMemo = "gate-memo"

// versionGateProof marks gates that verify a pause's or resume's proof
// where the destination's reviewers have keys. Runs from before keep
// taking a listed name: their recorded updates must decide as they did.
const versionGateProof = "gate-proof"

// versionGateOwn marks gates whose state is their own: a run takes the
// state in its input only when a gate run continued as new into it, and
// otherwise recovers what the gate's earlier runs published (activity
// RecoverGate); it refuses a name its workflow ID does not carry, stamps
// every memo it publishes with its run (DestinationState.Run), waits for
// its state before any update or report decides, and counts a report that
// would move its breaker, or grants a probe, only as the Delivery it names
// recorded it (VerifyReport, VerifyProbe). Asked once, at start.
// Runs from before keep taking their input as they did.
const versionGateOwn = "gate-own"
