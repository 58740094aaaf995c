package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// maxObject bounds what Get reads of one object: a replica is untrusted,
// and a restore must not be made to allocate without limit.
const maxObject = 4 << 30

// s3Bucket is a Bucket in S3 or an S3-compatible service.
type s3Bucket struct {
	c   *s3.Client
	url URL
	q   requester // every request's deadline and retries (request.go)
}

// endpoint is the service's address ("" for AWS's own).
func (b *s3Bucket) endpoint() string { return aws.ToString(b.c.Options().BaseEndpoint) }

// watch tells w of requests that wait long, and of their end.
func (b *s3Bucket) watch(w watcher) { b.q.setWatch(w) }

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
		// Each request is retried by requester.do, with its own
		// deadline: not by the SDK too.
		o.Retryer = aws.NopRetryer{}
	})
	return &s3Bucket{c: c, url: u}, nil
}

func (b *s3Bucket) PutNew(ctx context.Context, name string, body []byte) error {
	return b.PutNewReader(ctx, name, bytes.NewReader(body), int64(len(body)))
}

// multipartAbove: an object larger than this goes up in parts of
// partSize bytes (S3 takes at most 5 GiB in one PUT, and a failed part is
// sent again alone); at most maxParts of them, larger when the object
// needs it. Variables for tests (S3 wants parts of at least 5 MiB but the
// last).
var (
	multipartAbove int64 = 128 << 20
	partSize       int64 = 16 << 20
)

const maxParts = 10000

// partSent, when set (by tests), is called after each part is sent.
var partSent func(name string, part int32)

func (b *s3Bucket) PutNewReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error {
	if size > multipartAbove {
		return b.putMultipart(ctx, name, body, size)
	}
	err := b.q.do(ctx, "PUT", name, body, 1, func(ctx context.Context, body io.Reader) error {
		_, err := b.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(b.url.Bucket),
			Key:           aws.String(b.url.key(name)),
			Body:          body,
			ContentLength: aws.Int64(size),
			IfNoneMatch:   aws.String("*"),
		})
		return err
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
	var out *s3.GetObjectOutput
	h, err := b.q.run(ctx, "GET", name, nil, 1, true, func(ctx context.Context, _ io.Reader) error {
		var err error
		out, err = b.c.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(b.url.Bucket),
			Key:    aws.String(b.url.key(name)),
		})
		return err
	})
	if err != nil {
		if status(err) == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("replicate: get %s: %w", name, err)
	}
	return &heldBody{rc: out.Body, h: h}, nil
}

// putMultipart is PutNewReader in parts. The object appears only when the
// upload is completed, and completing it is conditional as a PUT is
// (If-None-Match: *, which S3 and versitygw honour on
// CompleteMultipartUpload): an object of that name is never overwritten.
// An upload that fails is aborted (its parts deleted); one that a crash
// cut short is aborted by the next run (AbortStale).
func (b *s3Bucket) putMultipart(ctx context.Context, name string, body io.ReadSeeker, size int64) (err error) {
	key := aws.String(b.url.key(name))
	// An object of that name is found before anything is sent (the
	// conditional completion is what guarantees it, this saves the
	// upload; a HEAD that fails otherwise, as a 403 where listing is not
	// allowed, says nothing).
	herr := b.q.do(ctx, "HEAD", name, nil, 1, func(ctx context.Context, _ io.Reader) error {
		_, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.url.Bucket), Key: key})
		return err
	})
	if herr == nil {
		return fmt.Errorf("%w: %s", ErrExists, name)
	}
	ra, ok := body.(io.ReaderAt)
	if !ok {
		ra = &seekReaderAt{r: body}
	}
	ps := max(partSize, (size+maxParts-1)/maxParts)
	var up *s3.CreateMultipartUploadOutput
	err = b.q.do(ctx, "POST", name+" (start a multipart upload)", nil, 1, func(ctx context.Context, _ io.Reader) error {
		var err error
		up, err = b.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b.url.Bucket), Key: key})
		return err
	})
	if err != nil {
		return fmt.Errorf("replicate: put %s: start a multipart upload: %w", name, err)
	}
	defer func() {
		if err != nil {
			// Aborted even when ctx was cancelled (for a while).
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			b.q.do(actx, "DELETE", name+" (abort a multipart upload)", nil, 1, func(ctx context.Context, _ io.Reader) error {
				_, err := b.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(b.url.Bucket), Key: key, UploadId: up.UploadId})
				return err
			})
		}
	}()
	parts, err := b.putParts(ctx, name, key, up.UploadId, ra, size, ps, ok)
	if err != nil {
		return err
	}
	err = b.q.do(ctx, "POST", name+" (complete a multipart upload)", nil, completeTimeoutFactor, func(ctx context.Context, _ io.Reader) error {
		_, err := b.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket:          aws.String(b.url.Bucket),
			Key:             key,
			UploadId:        up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			IfNoneMatch:     aws.String("*"),
		})
		return err
	})
	if err != nil {
		if st := status(err); st == http.StatusPreconditionFailed || st == http.StatusConflict {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return fmt.Errorf("replicate: put %s: complete a multipart upload: %w", name, err)
	}
	return nil
}

// partsAtOnce is how many parts of one multipart upload go up at once,
// each read from the body where it lies (no part is held in memory).
var partsAtOnce = 4

// putParts sends the parts of upload id (size bytes of ra, ps bytes
// each but the last), partsAtOnce at a time when ra reads at any offset
// at once (concurrent: a file), else one at a time. The first failure
// stops the others and is the error.
func (b *s3Bucket) putParts(ctx context.Context, name string, key, id *string, ra io.ReaderAt, size, ps int64, concurrent bool) ([]types.CompletedPart, error) {
	count := int((size + ps - 1) / ps)
	workers := 1
	if concurrent {
		workers = min(partsAtOnce, count)
	}
	parts := make([]types.CompletedPart, count)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan int32)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				off := int64(n-1) * ps
				var out *s3.UploadPartOutput
				err := b.q.do(pctx, "PUT", fmt.Sprintf("%s (part %d)", name, n), io.NewSectionReader(ra, off, min(ps, size-off)), 1, func(ctx context.Context, body io.Reader) error {
					var err error
					out, err = b.c.UploadPart(ctx, &s3.UploadPartInput{
						Bucket:        aws.String(b.url.Bucket),
						Key:           key,
						UploadId:      id,
						PartNumber:    aws.Int32(n),
						Body:          body,
						ContentLength: aws.Int64(min(ps, size-off)),
					})
					return err
				})
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("replicate: put %s: part %d: %w", name, n, err)
					}
					mu.Unlock()
					stop()
					continue
				}
				parts[n-1] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)}
				if partSent != nil {
					partSent(name, n)
				}
			}
		}()
	}
feed:
	for n := int32(1); int(n) <= count; n++ {
		select {
		case next <- n:
		case <-pctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replicate: put %s: %w", name, err)
	}
	return parts, nil
}

// seekReaderAt reads at an offset by seeking (parts are read one at a
// time).
type seekReaderAt struct{ r io.ReadSeeker }

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := s.r.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(s.r, p)
}

// AbortStale aborts the multipart uploads of objects of the replica
// (under PREFIX/blobs/, log/ and bases/; nothing else, even in a replica
// at a bucket's root): the lease makes this store their one writer, so
// any is one of its own runs' that a crash cut short (it holds parts the
// bucket bills for, and would never be completed).
func (b *s3Bucket) AbortStale(ctx context.Context) (int, error) {
	n := 0
	for _, dir := range []string{blobsDir, logDir, basesDir} {
		p := s3.NewListMultipartUploadsPaginator(b.c, &s3.ListMultipartUploadsInput{
			Bucket: aws.String(b.url.Bucket),
			Prefix: aws.String(b.url.key(dir)),
		})
		for p.HasMorePages() {
			var page *s3.ListMultipartUploadsOutput
			err := b.q.do(ctx, "GET", dir+" (list multipart uploads)", nil, 1, func(ctx context.Context, _ io.Reader) error {
				var err error
				page, err = p.NextPage(ctx)
				return err
			})
			if err != nil {
				return n, fmt.Errorf("replicate: list multipart uploads: %w", err)
			}
			for _, u := range page.Uploads {
				err := b.q.do(ctx, "DELETE", aws.ToString(u.Key)+" (abort a multipart upload)", nil, 1, func(ctx context.Context, _ io.Reader) error {
					_, err := b.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(b.url.Bucket), Key: u.Key, UploadId: u.UploadId})
					return err
				})
				if err != nil && status(err) != http.StatusNotFound {
					return n, fmt.Errorf("replicate: abort the multipart upload of %s: %w", aws.ToString(u.Key), err)
				}
				n++
			}
		}
	}
	return n, nil
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
		var page *s3.ListObjectsV2Output
		err := b.q.do(ctx, "GET", prefix+" (list)", nil, 1, func(ctx context.Context, _ io.Reader) error {
			var err error
			page, err = p.NextPage(ctx)
			return err
		})
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
	err := b.q.do(ctx, "DELETE", name, nil, 1, func(ctx context.Context, _ io.Reader) error {
		_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: aws.String(b.url.Bucket),
			Key:    aws.String(b.url.key(name)),
		})
		return err
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
