package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

type franzPeer struct{}

func franzOptions(o *Options) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID("franz-peer"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(o.Topic),
	}
	if !o.Idempotent && o.TxnID == "" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.TxnID != "" {
		opts = append(opts, kgo.TransactionalID(o.TxnID))
	}
	if o.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	return opts
}

func franzRecords(o *Options, start, count int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, count)
	for i := start; i < start+count; i++ {
		key, value := record(o, i)
		recs = append(recs, &kgo.Record{Key: key, Value: value})
	}
	return recs
}

func franzSent(results kgo.ProduceResults, txn int, committed bool) error {
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
		rec := r.Record
		emit(Event{Event: "sent", Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Txn: txn, Committed: committed})
	}
	return nil
}

func (franzPeer) Produce(o *Options) error {
	client, err := kgo.NewClient(franzOptions(o)...)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	if o.TxnID == "" {
		return franzSent(client.ProduceSync(ctx, franzRecords(o, 0, o.Count)...), -1, true)
	}
	next := 0
	for n, plan := range o.Txns {
		if err := client.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		results := client.ProduceSync(ctx, franzRecords(o, next, plan.Records)...)
		next += plan.Records
		if err := results.FirstErr(); err != nil {
			return err
		}
		end := kgo.TryAbort
		if plan.Commit {
			end = kgo.TryCommit
		}
		if err := client.EndTransaction(ctx, end); err != nil {
			return fmt.Errorf("end transaction %d: %w", n, err)
		}
		if err := franzSent(results, n, plan.Commit); err != nil {
			return err
		}
	}
	return nil
}

func franzRecord(rec *kgo.Record) Event {
	ev := Event{Event: "record", Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		ev.Headers = append(ev.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return ev
}

func (franzPeer) Consume(o *Options) error {
	partitions := map[int32]kgo.Offset{}
	for p := 0; p < o.Partitions; p++ {
		partitions[int32(p)] = kgo.NewOffset().AtStart()
	}
	opts := append(franzOptions(o), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.Topic: partitions}))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer client.Close()
	for seen := 0; seen < o.Count; {
		fetches := client.PollFetches(context.Background())
		if err := fetches.Err(); err != nil {
			return err
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			emit(franzRecord(rec))
			seen++
		})
	}
	return nil
}

func (franzPeer) Group(o *Options, stop <-chan struct{}) error {
	var balancer kgo.GroupBalancer
	switch o.Assignor {
	case "range":
		balancer = kgo.RangeBalancer()
	case "roundrobin":
		balancer = kgo.RoundRobinBalancer()
	case "cooperative-sticky":
		balancer = kgo.CooperativeStickyBalancer()
	default:
		return fmt.Errorf("unknown assignor %q", o.Assignor)
	}
	opts := append(franzOptions(o),
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topic),
		kgo.Balancers(balancer),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6e9),
		kgo.HeartbeatInterval(5e8),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			emit(Event{Event: "assigned", Partitions: assigned})
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				emit(Event{Event: "error", Topic: err.Error()})
			}
			emit(Event{Event: "revoked", Partitions: revoked})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			emit(Event{Event: "revoked", Partitions: lost})
		}),
		kgo.AutoCommitMarks(),
	)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fetchErr = err
			}
		})
		if fetchErr != nil {
			client.Close()
			return fetchErr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			emit(franzRecord(rec))
			client.MarkCommitRecords(rec)
		})
		if err := client.CommitMarkedOffsets(context.Background()); err != nil {
			client.Close()
			return err
		}
	}
	if err := client.CommitMarkedOffsets(context.Background()); err != nil {
		client.Close()
		return err
	}
	client.Close() // leaves the group
	return nil
}
