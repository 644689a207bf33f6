package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// objects are the shadow pod's documents, decoded.
type objects struct {
	secret  *corev1.Secret
	deploy  *appsv1.Deployment
	svc     *corev1.Service
	ingress *networkingv1.Ingress
}

func (o objects) deepCopy() objects {
	return objects{o.secret.DeepCopy(), o.deploy.DeepCopy(), o.svc.DeepCopy(), o.ingress.DeepCopy()}
}

// wantKinds is every document Render writes, in order, with its apiVersion.
var wantKinds = []struct{ kind, apiVersion string }{
	{"Secret", "v1"},
	{"Deployment", "apps/v1"},
	{"Service", "v1"},
	{"Ingress", "networking.k8s.io/v1"},
}

// decodeStream splits a YAML stream into documents and decodes each
// strictly (unknown or duplicate fields are errors) into the k8s.io/api
// type of its kind. The stream must hold exactly the kinds of wantKinds, in
// order, after a preamble of comments.
func decodeStream(data []byte) (objects, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return objects{}, err
	}
	if len(docs) != len(wantKinds) {
		return objects{}, fmt.Errorf("%d documents, want %d", len(docs), len(wantKinds))
	}
	var o objects
	for i, doc := range docs {
		if err := o.decode(doc, wantKinds[i].kind, wantKinds[i].apiVersion); err != nil {
			return objects{}, fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return o, nil
}

// splitDocuments returns the non-empty documents; only the first may be
// empty (the comment preamble).
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if isEmptyDocument(doc) {
			if i > 0 {
				return nil, fmt.Errorf("empty document %d", i+1)
			}
			continue
		}
		docs = append(docs, doc)
	}
}

func isEmptyDocument(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

func (o *objects) decode(doc []byte, kind, apiVersion string) error {
	var tm struct{ Kind, APIVersion string }
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	if tm.Kind != kind || tm.APIVersion != apiVersion {
		return fmt.Errorf("%s %s, want %s %s", tm.APIVersion, tm.Kind, apiVersion, kind)
	}
	var into any
	switch kind {
	case "Secret":
		o.secret = new(corev1.Secret)
		into = o.secret
	case "Deployment":
		o.deploy = new(appsv1.Deployment)
		into = o.deploy
	case "Service":
		o.svc = new(corev1.Service)
		into = o.svc
	case "Ingress":
		o.ingress = new(networkingv1.Ingress)
		into = o.ingress
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}
