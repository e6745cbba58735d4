package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// labState is lab.json (also served live at GET <control>/state).
type labState struct {
	Control     string `json:"control"`
	Talosconfig string `json:"talosconfig"`
	Context     string `json:"context"`
	CAAlgorithm string `json:"ca_algorithm"`
	Cluster     struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"cluster"`
	Machines []labMachine `json:"machines"`
}

type labDisk struct {
	DevPath    string `json:"dev_path"`
	Size       uint64 `json:"size"`
	Model      string `json:"model"`
	Serial     string `json:"serial"`
	SystemDisk bool   `json:"system_disk"`
}

type labVolume struct {
	ID        string `json:"id"`
	Encrypted bool   `json:"encrypted"`
}

type labMachine struct {
	Name          string      `json:"name"`
	Address       string      `json:"address"`
	Role          string      `json:"role"`
	Mode          string      `json:"mode"`
	Version       string      `json:"version"`
	UUID          string      `json:"uuid"`
	Hostname      string      `json:"hostname"`
	Stage         string      `json:"stage"`
	NodeID        string      `json:"node_id"`
	ClusterName   string      `json:"cluster_name"`
	ClusterID     string      `json:"cluster_id"`
	EtcdMemberID  uint64      `json:"etcd_member_id"`
	Up            bool        `json:"up"`
	Disks         []labDisk   `json:"disks"`
	Volumes       []labVolume `json:"volumes"`
	MachineConfig string      `json:"machine_config"`
	CNIFiles      []string    `json:"cni_files"`
	// the system extensions it runs, in Talos's order (ExtensionStatuses ids "0", "1", ...)
	Extensions []labExtension `json:"extensions"`
}

type labExtension struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func (m labMachine) configured() bool { return m.Mode == "configured" }

func (m labMachine) controlPlane() bool { return m.configured() && m.Role == "controlplane" }

// minor returns (major, minor) of the machine's Talos version.
func (m labMachine) minor() (int, int) { return versionMinor(m.Version) }

func versionMinor(v string) (int, int) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}

	a, _ := strconv.Atoi(parts[0])
	b, _ := strconv.Atoi(parts[1])

	return a, b
}

func versionAtLeast(v string, major, minor int) bool {
	a, b := versionMinor(v)

	return a > major || (a == major && b >= minor)
}

func loadLab(path string) (*labState, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	var l labState
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	if len(l.Machines) == 0 {
		return nil, fmt.Errorf("%s: no machines", path)
	}

	return &l, nil
}

// labControl talks to the simulator's control API.
type labControl struct {
	base string
	http *http.Client
}

func (lc *labControl) state(ctx context.Context) (*labState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lc.base+"/state", nil)
	if err != nil {
		return nil, err
	}

	resp, err := lc.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close() //nolint:errcheck

	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}

	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /state: %s: %s", resp.Status, body)
	}

	var l labState
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("GET /state: %w", err)
	}

	return &l, nil
}

// requests is GET /machines/<name>/requests: the last request of each method that reached the
// machine, serialized, by method path (JSON base64, which encoding/json decodes into []byte).
func (lc *labControl) requests(ctx context.Context, name string) (map[string][]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lc.base+"/machines/"+name+"/requests", nil)
	if err != nil {
		return nil, err
	}

	resp, err := lc.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close() //nolint:errcheck

	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}

	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /machines/%s/requests: %s: %s", name, resp.Status, body)
	}

	out := map[string][]byte{}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET /machines/%s/requests: %w", name, err)
	}

	return out, nil
}

func (lc *labControl) machine(ctx context.Context, name string) (labMachine, error) {
	l, err := lc.state(ctx)
	if err != nil {
		return labMachine{}, err
	}

	for _, m := range l.Machines {
		if m.Name == name {
			return m, nil
		}
	}

	return labMachine{}, fmt.Errorf("machine %q not in the lab state", name)
}

func (lc *labControl) post(ctx context.Context, path string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lc.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}

	req.Header.Set("Content-Type", "application/json")

	resp, err := lc.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck

	out, _ := io.ReadAll(resp.Body)

	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, out)
	}

	return nil
}

// waitMachine polls the lab state until cond holds for the machine.
func (lc *labControl) waitMachine(ctx context.Context, name string, timeout time.Duration, what string, cond func(labMachine) bool) (labMachine, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var (
		last    labMachine
		lastErr error
	)

	for {
		m, err := lc.machine(ctx, name)
		if err == nil {
			last = m

			if cond(m) {
				return m, nil
			}
		} else {
			lastErr = err
		}

		select {
		case <-ctx.Done():
			if lastErr != nil && last.Name == "" {
				return last, fmt.Errorf("waiting for %s: %w", what, lastErr)
			}

			return last, fmt.Errorf("timed out after %s waiting for %s (last state: mode=%s stage=%s up=%v version=%s)",
				timeout, what, last.Mode, last.Stage, last.Up, last.Version)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
