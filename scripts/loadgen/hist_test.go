package main

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBucketsCoverEveryValueClosely(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<16; v++ {
		i := bucket(v)
		assert.True(t, i == prev || i == prev+1, "buckets are contiguous at %d", v)
		prev = i
		if v < 256 {
			assert.Equal(t, v, upper(i), "small values are exact")
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := rng.Int64N(int64(10 * time.Minute))
		up := upper(bucket(v))
		assert.GreaterOrEqual(t, up, v)
		assert.Less(t, float64(up-v), float64(v)/128+1, "bucket width at %d", v)
	}
	assert.Equal(t, histBuckets-1, bucket(1<<62), "beyond the range: the last bucket")
}

func TestQuantileIsNearestRank(t *testing.T) {
	var h hist
	assert.Zero(t, h.quantile(0.5))
	for v := 1; v <= 1000; v++ {
		h.record(time.Duration(v) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {0.999, 999 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.quantile(tc.q)
		assert.GreaterOrEqual(t, got, tc.want, "q %v", tc.q)
		assert.LessOrEqual(t, float64(got-tc.want), float64(tc.want)/128, "q %v: %v", tc.q, got)
	}
	assert.Equal(t, time.Millisecond, h.max)
	assert.Equal(t, int64(1000), h.n)
}

func TestWriteToListsTheNonEmptyBuckets(t *testing.T) {
	var h hist
	for _, v := range []time.Duration{100, 100, 1000 * time.Microsecond, 999 * time.Microsecond} {
		h.record(v)
	}
	var b bytes.Buffer
	assert.NoError(t, h.writeTo(&b))
	assert.Equal(t, "upper_ns,count\n100,2\n999423,1\n1000000,1\n", b.String(),
		"rising, the last bucket's upper end the largest value recorded")
}
