package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/workflows"
)

func TestReviewDecisionValidate(t *testing.T) {
	require.NoError(t, workflows.ReviewDecision{Decision: "retry", Reviewer: "a"}.Validate())
	require.EqualError(t, workflows.ReviewDecision{}.Validate(),
		"decision: missing; use retry, delivered or abandon\nreviewer: required, who is deciding")
}
