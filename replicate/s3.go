package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// maxObject bounds what Get reads of one object: a replica is untrusted,
// and a restore must not be made to allocate without limit.
const maxObject = 4 << 30

// s3Bucket is a Bucket in S3 or an S3-compatible service.
type s3Bucket struct {
	c   *s3.Client
	url URL
}

// OpenS3 opens the replica at u with the credentials, region and endpoint
// of the standard AWS variables and files (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_PROFILE, the
// shared config and credentials files), as every S3 tool finds them. With
// a custom endpoint (another S3-compatible service) objects are addressed
// by path (http://host/bucket/key), which such services serve without
// wildcard DNS. Request checksums are sent only where S3 requires them,
// which every S3-compatible service accepts.
func OpenS3(ctx context.Context, u URL) (Bucket, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("replicate: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &s3Bucket{c: c, url: u}, nil
}

func (b *s3Bucket) PutNew(ctx context.Context, name string, body []byte) error {
	return b.PutNewReader(ctx, name, bytes.NewReader(body), int64(len(body)))
}

func (b *s3Bucket) PutNewReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error {
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.url.Bucket),
		Key:           aws.String(b.url.key(name)),
		Body:          body,
		ContentLength: aws.Int64(size),
		IfNoneMatch:   aws.String("*"),
	})
	if err != nil {
		if status(err) == http.StatusPreconditionFailed || status(err) == http.StatusConflict {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return fmt.Errorf("replicate: put %s: %w", name, err)
	}
	return nil
}

func (b *s3Bucket) GetReader(ctx context.Context, name string) (io.ReadCloser, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.url.Bucket),
		Key:    aws.String(b.url.key(name)),
	})
	if err != nil {
		if status(err) == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("replicate: get %s: %w", name, err)
	}
	return out.Body, nil
}

func (b *s3Bucket) Get(ctx context.Context, name string) ([]byte, error) {
	body, err := b.GetReader(ctx, name)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxObject+1))
	if err != nil {
		return nil, fmt.Errorf("replicate: get %s: %w", name, err)
	}
	if len(data) > maxObject {
		return nil, fmt.Errorf("replicate: get %s: larger than %d bytes", name, int64(maxObject))
	}
	return data, nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	full := b.url.key(prefix)
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.url.Bucket),
		Prefix: aws.String(full),
	})
	strip := len(b.url.key(""))
	var names []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("replicate: list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			if k := aws.ToString(o.Key); len(k) >= strip {
				names = append(names, k[strip:])
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

func (b *s3Bucket) Delete(ctx context.Context, name string) error {
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(b.url.Bucket),
		Key:    aws.String(b.url.key(name)),
	})
	if err != nil && status(err) != http.StatusNotFound {
		return fmt.Errorf("replicate: delete %s: %w", name, err)
	}
	return nil
}

// status is the HTTP status of a failed S3 call (0 when it never got one).
func status(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return http.StatusNotFound
		case "PreconditionFailed":
			return http.StatusPreconditionFailed
		}
	}
	return 0
}
