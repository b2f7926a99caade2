// Command peer runs sarama or franz-go against a Kafka cluster for pykaf's
// interoperability tests (tests/peers). Every event is one JSON object per
// line on stdout; errors go to stderr and end the program with status 1.
//
//	peer <sarama|franz> produce --brokers B --topic T --count N [--keys K]
//	     [--prefix P] [--idempotent] [--transactional-id ID --txns commit:5,abort:3]
//	peer <sarama|franz> consume --brokers B --topic T --partitions P --count N
//	     [--read-committed]
//	peer <sarama|franz> group --brokers B --topic T --group G [--assignor range]
//
// produce prints {"event":"sent",...} per acknowledged record, then
// {"event":"done"}. consume prints {"event":"record",...} per record (key,
// value and header values base64, null when null) and ends after N records.
// group prints "assigned", "revoked" and "record" events, marks and commits
// what it read, and leaves the group when stdin is closed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header is one record header as printed.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Event is one line of output; unused fields are left out.
type Event struct {
	Event      string             `json:"event"`
	Topic      string             `json:"topic,omitempty"`
	Partition  int32              `json:"partition"`
	Offset     int64              `json:"offset"`
	Key        []byte             `json:"key"`
	Value      []byte             `json:"value"`
	Headers    []Header           `json:"headers,omitempty"`
	Txn        int                `json:"txn"`
	Committed  bool               `json:"committed"`
	Partitions map[string][]int32 `json:"partitions,omitempty"`
}

var outMu sync.Mutex

func emit(ev Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		fail(err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "peer:", err)
	os.Exit(1)
}

// Options are the flags of every subcommand.
type Options struct {
	Brokers       []string
	Topic         string
	Count         int
	Keys          int
	Prefix        string
	Idempotent    bool
	TxnID         string
	Txns          []TxnPlan
	Partitions    int
	ReadCommitted bool
	Group         string
	Assignor      string
	Timeout       time.Duration
}

// TxnPlan is one transaction: how many records, and whether it commits.
type TxnPlan struct {
	Records int
	Commit  bool
}

func parseTxns(spec string) ([]TxnPlan, error) {
	var plans []TxnPlan
	if spec == "" {
		return plans, nil
	}
	for _, part := range strings.Split(spec, ",") {
		kind, n, ok := strings.Cut(part, ":")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || count < 1 || (kind != "commit" && kind != "abort") {
			return nil, fmt.Errorf("bad --txns element %q (want commit:N or abort:N)", part)
		}
		plans = append(plans, TxnPlan{Records: count, Commit: kind == "commit"})
	}
	return plans, nil
}

// record returns the key and value of the i-th record a producer writes.
func record(o *Options, i int) ([]byte, []byte) {
	var key []byte
	if o.Keys > 0 {
		key = []byte(fmt.Sprintf("k%d", i%o.Keys))
	}
	return key, []byte(fmt.Sprintf("%s%d", o.Prefix, i))
}

// waitStdinClosed returns a channel closed once stdin reaches its end.
func waitStdinClosed() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		reader := bufio.NewReader(os.Stdin)
		for {
			if _, err := reader.ReadByte(); err != nil {
				close(done)
				return
			}
		}
	}()
	return done
}

func main() {
	if len(os.Args) < 3 {
		fail(fmt.Errorf("usage: peer <sarama|franz> <produce|consume|group> [flags]"))
	}
	lib, cmd := os.Args[1], os.Args[2]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	brokers := fs.String("brokers", "", "bootstrap brokers, comma-separated")
	o := &Options{}
	fs.StringVar(&o.Topic, "topic", "", "topic")
	fs.IntVar(&o.Count, "count", 0, "records to produce or consume")
	fs.IntVar(&o.Keys, "keys", 0, "keys k0..k(N-1) in turn; no keys when 0")
	fs.StringVar(&o.Prefix, "prefix", "", "value prefix")
	fs.BoolVar(&o.Idempotent, "idempotent", false, "idempotent producer")
	fs.StringVar(&o.TxnID, "transactional-id", "", "transactional id")
	txns := fs.String("txns", "", "transactions: commit:N,abort:M,...")
	fs.IntVar(&o.Partitions, "partitions", 1, "partitions to consume (0..P-1)")
	fs.BoolVar(&o.ReadCommitted, "read-committed", false, "read_committed isolation")
	fs.StringVar(&o.Group, "group", "", "consumer group id")
	fs.StringVar(&o.Assignor, "assignor", "range", "range, roundrobin or cooperative-sticky")
	fs.DurationVar(&o.Timeout, "timeout", 60*time.Second, "give up after this long")
	if err := fs.Parse(os.Args[3:]); err != nil {
		fail(err)
	}
	o.Brokers = strings.Split(*brokers, ",")
	plans, err := parseTxns(*txns)
	if err != nil {
		fail(err)
	}
	o.Txns = plans
	if o.Topic == "" || *brokers == "" {
		fail(fmt.Errorf("--brokers and --topic are required"))
	}
	if o.TxnID != "" && len(o.Txns) == 0 {
		fail(fmt.Errorf("--transactional-id needs --txns"))
	}
	var peer Peer
	switch lib {
	case "sarama":
		peer = &saramaPeer{}
	case "franz":
		peer = &franzPeer{}
	default:
		fail(fmt.Errorf("unknown client %q (sarama or franz)", lib))
	}
	timer := time.AfterFunc(o.Timeout, func() { fail(fmt.Errorf("%s %s: timed out after %s", lib, cmd, o.Timeout)) })
	defer timer.Stop()
	switch cmd {
	case "produce":
		err = peer.Produce(o)
	case "consume":
		err = peer.Consume(o)
	case "group":
		if o.Group == "" {
			fail(fmt.Errorf("--group is required"))
		}
		err = peer.Group(o, waitStdinClosed())
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fail(err)
	}
	emit(Event{Event: "done"})
}

// Peer is one client library.
type Peer interface {
	Produce(o *Options) error
	Consume(o *Options) error
	Group(o *Options, stop <-chan struct{}) error
}
