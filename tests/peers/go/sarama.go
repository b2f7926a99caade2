package main

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
)

type saramaPeer struct{}

func saramaConfig(o *Options) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_9_0_0
	cfg.ClientID = "sarama-peer"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 10
	if o.Idempotent || o.TxnID != "" {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if o.TxnID != "" {
		cfg.Producer.Transaction.ID = o.TxnID
	}
	cfg.Consumer.Return.Errors = true
	if o.ReadCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	return cfg
}

func saramaMessages(o *Options, start, count int) []*sarama.ProducerMessage {
	msgs := make([]*sarama.ProducerMessage, 0, count)
	for i := start; i < start+count; i++ {
		key, value := record(o, i)
		msg := &sarama.ProducerMessage{Topic: o.Topic, Value: sarama.ByteEncoder(value)}
		if key != nil {
			msg.Key = sarama.ByteEncoder(key)
		}
		msgs = append(msgs, msg)
	}
	return msgs
}

func saramaSent(msgs []*sarama.ProducerMessage, txn int, committed bool) {
	for _, msg := range msgs {
		ev := Event{Event: "sent", Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Txn: txn, Committed: committed}
		if msg.Key != nil {
			ev.Key, _ = msg.Key.Encode()
		}
		ev.Value, _ = msg.Value.Encode()
		emit(ev)
	}
}

func (saramaPeer) Produce(o *Options) error {
	producer, err := sarama.NewSyncProducer(o.Brokers, saramaConfig(o))
	if err != nil {
		return err
	}
	defer producer.Close()
	if o.TxnID == "" {
		msgs := saramaMessages(o, 0, o.Count)
		if err := producer.SendMessages(msgs); err != nil {
			return err
		}
		saramaSent(msgs, -1, true)
		return nil
	}
	next := 0
	for n, plan := range o.Txns {
		if err := producer.BeginTxn(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		msgs := saramaMessages(o, next, plan.Records)
		next += plan.Records
		if err := producer.SendMessages(msgs); err != nil {
			return err
		}
		if plan.Commit {
			err = producer.CommitTxn()
		} else {
			err = producer.AbortTxn()
		}
		if err != nil {
			return fmt.Errorf("end transaction %d: %w", n, err)
		}
		saramaSent(msgs, n, plan.Commit)
	}
	return nil
}

func saramaRecord(msg *sarama.ConsumerMessage) Event {
	ev := Event{Event: "record", Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Key: msg.Key, Value: msg.Value}
	for _, h := range msg.Headers {
		ev.Headers = append(ev.Headers, Header{Key: string(h.Key), Value: h.Value})
	}
	return ev
}

func (saramaPeer) Consume(o *Options) error {
	consumer, err := sarama.NewConsumer(o.Brokers, saramaConfig(o))
	if err != nil {
		return err
	}
	defer consumer.Close()
	records := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, o.Partitions)
	for p := 0; p < o.Partitions; p++ {
		pc, err := consumer.ConsumePartition(o.Topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return err
		}
		defer pc.Close()
		go func() {
			for {
				select {
				case msg, ok := <-pc.Messages():
					if !ok {
						return
					}
					records <- msg
				case cerr, ok := <-pc.Errors():
					if ok {
						errs <- cerr
					}
					return
				}
			}
		}()
	}
	for seen := 0; seen < o.Count; {
		select {
		case msg := <-records:
			emit(saramaRecord(msg))
			seen++
		case err := <-errs:
			return err
		}
	}
	return nil
}

type saramaHandler struct{}

func (saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	emit(Event{Event: "assigned", Partitions: s.Claims()})
	return nil
}

func (saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	emit(Event{Event: "revoked", Partitions: s.Claims()})
	return nil
}

// ConsumeClaim reports its partition as assigned and, when its records end,
// as revoked: with a cooperative strategy that is how sarama tells a handler
// of a revocation (Setup and Cleanup run once per membership, not per rebalance).
func (saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	claimed := map[string][]int32{c.Topic(): {c.Partition()}}
	emit(Event{Event: "assigned", Partitions: claimed})
	for msg := range c.Messages() {
		emit(saramaRecord(msg))
		s.MarkMessage(msg, "")
	}
	emit(Event{Event: "revoked", Partitions: claimed})
	return nil
}

func (saramaPeer) Group(o *Options, stop <-chan struct{}) error {
	cfg := saramaConfig(o)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Session.Timeout = 6e9
	cfg.Consumer.Group.Heartbeat.Interval = 5e8
	switch o.Assignor {
	case "range":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "roundrobin":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case "cooperative-sticky":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	default:
		return fmt.Errorf("unknown assignor %q", o.Assignor)
	}
	group, err := sarama.NewConsumerGroup(o.Brokers, o.Group, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{o.Topic}, saramaHandler{}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for err := range group.Errors() {
			emit(Event{Event: "error", Topic: err.Error()})
		}
	}()
	select {
	case <-stop:
		cancel()
		err = <-done
	case err = <-done:
		cancel()
	}
	if cerr := group.Close(); err == nil {
		err = cerr
	}
	return err
}
