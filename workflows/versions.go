// Every workflow.GetVersion marker of the Delivery workflow, with what it
// guards; the gate's are in package gate. Each is asked where its change
// is; a change that alters the command sequence adds one here and a
// history set that carries it. One change is switched by what the start
// recorded instead, where a marker would cost every delivery more than the
// change saves: the end's state upsert (finish, history set
// lean-happy-path).

package workflows

// versionCancelEnds marks deliveries that end a cancel request in a final
// status of their own (canceled), recorded as any other end is. Asked only
// once a cancel request has come, so no other history carries it.
const versionCancelEnds = "cancel-ends"

// versionPlainIdentifiers marks deliveries that refuse an identifier with a
// control or bidirectional formatting character (opkey.CharacterError);
// those started before the rule delivered it. Asked only for such an
// identifier, so no other history carries it.
const versionPlainIdentifiers = "plain-identifiers"

// versionRecordedContract marks deliveries that decide from the terms in
// their history. Asked only where a delivery has none recorded, so the
// happy path (whose first attempt records them) writes no version marker.
const versionRecordedContract = "recorded-contract"

// versionReviewDesk marks deliveries that tell someone when they park,
// never hold a decision back for a reminder, close the review timer when a
// decision comes, and end as failed when nothing was delivered. Asked only
// when a delivery parks or ends without an effect, so the happy path writes
// no marker.
const versionReviewDesk = "review-desk"

// versionBatchRepeats marks deliveries that take a batch job's decision
// once. Asked only when one arrives again, so no other history carries it.
const versionBatchRepeats = "batch-repeats"

// versionDerivedAttributes marks deliveries that replace search
// attributes a caller set at start when they differ from the input's.
const versionDerivedAttributes = "derived-attributes"

// versionPlaceholders marks deliveries that refuse a decision still holding
// a placeholder of the review command (a resource id ID, a reviewer NAME)
// by signal; the update's validator refuses it before it is recorded.
// Asked only for such a decision, so no other history carries it.
const versionPlaceholders = "placeholders"

// versionRetryState marks deliveries that publish retry_wait (CourierState)
// while they wait for their next attempt, and delivering after; those
// before it showed delivering throughout. Asked only when a retry is
// scheduled, so the happy path writes no marker.
const versionRetryState = "retry-state"

// versionLedger marks deliveries that record an outcome a review decided
// (delivered, abandon) in the workers' outcome ledger before they end.
// Asked only when such a decision comes, so the happy path (whose attempt
// records its own outcome, inside the activity) writes no marker.
const versionLedger = "ledger"

// versionSettle marks deliveries that wait their lookup destination's
// settle time after an unknown outcome before they look the effect up;
// those before it looked at once. Asked only before such a lookup, so the
// happy path writes no marker.
const versionSettle = "settle"

// versionRevocation marks deliveries that ask the workers' current
// destinations file, by a local activity (CheckSigner), whether the key
// that signed a verified decision still decides it there: a key removed
// since the delivery recorded it is refused. Asked only when a signed
// decision verifies, so no other history carries it.
const versionRevocation = "revocation"

// versionRetentionAtSend marks deliveries that park an uncertain outcome
// when the retry would reach a key destination after its key retention
// (its wait, then its attempt timeout); those before it retried when the
// retention had not passed at the decision. Asked only where the two rules
// lead to different steps, so no other history carries it.
const versionRetentionAtSend = "retention-at-send"

// versionRetentionAfterUncertain marks deliveries that park, once an
// attempt may have applied, any send that could reach a key destination
// after its key retention: a retry after a throttled, in-flight or not
// sent answer, a send after a hold, or an attempt whose workflow task
// came too late to start it in time (it is then not sent). Those before
// it parked only a retry decided on an uncertain attempt. Asked only
// where the two rules lead to different steps, so no other history
// carries it.
const versionRetentionAfterUncertain = "retention-after-uncertain"
