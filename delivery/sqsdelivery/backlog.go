package sqsdelivery

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Backlog returns the queue's ApproximateNumberOfMessages: the signal of an
// adaptive policy whose target is this queue.
func (d *Deliverer) Backlog(ctx context.Context, queueURL string) (int, error) {
	out, err := d.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, fmt.Errorf("sqsdelivery: backlog of %s: %w", queueURL, err)
	}
	v, ok := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
	if !ok {
		return 0, fmt.Errorf("sqsdelivery: backlog of %s: no ApproximateNumberOfMessages in the answer", queueURL)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("sqsdelivery: backlog of %s: %q is not a count: %w", queueURL, v, err)
	}
	return n, nil
}
