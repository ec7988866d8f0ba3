import { describe, expect, it } from 'vitest';
import { checkPlacementRequest, flavorFromPlacementRequest, parseFlavor, RequestSpecError, specFromPlacementRequest, toCandidatesQuery } from '@ert/placement';
import type { RequestGroup } from '@ert/plugin-api';

const valid = {
  groups: [
    { suffix: '', resources: { VCPU: 2, MEMORY_MB: 512 }, requiredTraits: ['HW_CPU_X86_AVX2'], forbiddenTraits: ['CUSTOM_SLOW'], memberOf: [['a1', 'a2']], forbiddenAggregates: ['a3'] },
    { suffix: '_NIC', resources: { SRIOV_NET_VF: 1 }, requiredTraits: [], anyOfTraits: [['CUSTOM_PHYSNET1', 'CUSTOM_PHYSNET2']], forbiddenTraits: [], memberOf: [] },
    { suffix: '_ACC', resources: { FPGA: 1 }, requiredTraits: [], forbiddenTraits: [], memberOf: [], inTree: '11111111-2222-4333-8444-555555555555' },
  ],
  groupPolicy: 'isolate',
  sameSubtree: [['_NIC', '_ACC']],
  rootRequiredTraits: ['CUSTOM_ROOT'],
  rootForbiddenTraits: ['COMPUTE_STATUS_DISABLED'],
};

describe('checkPlacementRequest', () => {
  it('accepts a full request and keeps it as given', () => {
    expect(checkPlacementRequest(valid)).toEqual(valid);
  });

  it.each([
    ['no groups', { groups: [] }, /groups=\[\]/],
    ['first group suffixed', { groups: [{ suffix: '1', resources: { VCPU: 1 } }] }, /groups\[0\]\.suffix=1: expected ''/],
    ['bad class', { groups: [{ resources: { vcpu: 1 } }] }, /groups\[0\]\.resources\.vcpu=1: expected a standard resource class/],
    ['zero amount', { groups: [{ resources: { VCPU: 0 } }] }, /groups\[0\]\.resources\.VCPU=0: expected a positive integer/],
    ['unknown field', { groups: [{ resources: {}, traits: ['X'] }] }, /groups\[0\]\.traits/],
    ['two numbered groups without policy', { groups: [{}, { suffix: '1', resources: { VCPU: 1 } }, { suffix: '2', resources: { VCPU: 1 } }] }, /groupPolicy=undefined: expected none or isolate \(required/],
    ['two numbered groups, one without resources, without policy', { groups: [{}, { suffix: '1', resources: { VCPU: 1 } }, { suffix: '2', requiredTraits: ['T'] }], sameSubtree: [['1', '2']] }, /groupPolicy=undefined/],
    ['an any-of list that is all forbidden', { groups: [{ resources: { VCPU: 1 }, anyOfTraits: [['A', 'B']], forbiddenTraits: ['A', 'B'] }] }, /anyOfTraits=\["A","B"\]/],
    ['duplicate suffix', { groups: [{}, { suffix: '1', resources: { VCPU: 1 } }, { suffix: '1', resources: { VCPU: 1 } }], groupPolicy: 'none' }, /distinct suffixes/],
    ['same_subtree naming no group', { groups: [{}, { suffix: '1', resources: { VCPU: 1 } }], sameSubtree: [['1', '9']] }, /sameSubtree\[0\]/],
    ['resourceless group outside same_subtree', { groups: [{}, { suffix: '1', requiredTraits: ['X'] }] }, /groups\[1\]\.resources/],
    ['trait both required and forbidden', { groups: [{ resources: { VCPU: 1 }, requiredTraits: ['T'], forbiddenTraits: ['T'] }] }, /forbiddenTraits=T/],
  ])('refuses %s, naming the field', (_name, input, message) => {
    expect(() => checkPlacementRequest(input)).toThrow(RequestSpecError);
    expect(() => checkPlacementRequest(input)).toThrow(message);
  });
});

describe('toCandidatesQuery and specFromPlacementRequest', () => {
  it('writes the request in Placement 1.39 query syntax', () => {
    expect(toCandidatesQuery(checkPlacementRequest(valid))).toBe(
      'resources=VCPU:2,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_SLOW&member_of=in:a1,a2&member_of=!in:a3' +
        '&resources_NIC=SRIOV_NET_VF:1&required_NIC=in:CUSTOM_PHYSNET1,CUSTOM_PHYSNET2' +
        '&resources_ACC=FPGA:1&in_tree_ACC=11111111-2222-4333-8444-555555555555' +
        '&group_policy=isolate&same_subtree=_NIC,_ACC&root_required=CUSTOM_ROOT,!COMPUTE_STATUS_DISABLED',
    );
  });

  it('records the request on a flavor that parseFlavor reads back as the same groups', () => {
    // Mutation seen caught: a flavor carrying only the totals (vcpus/memory/disk), which lost
    // numbered groups, traits and custom classes for the tracker that later reads it.
    const request = checkPlacementRequest({
      groups: [
        { resources: { VCPU: 2, CUSTOM_X: 1 }, forbiddenTraits: ['CUSTOM_SLOW'], forbiddenAggregates: ['a3'] },
        { suffix: '1', resources: { SRIOV_NET_VF: 1, DISK_GB: 5 }, requiredTraits: ['CUSTOM_PHYSNET1'], memberOf: [['a1', 'a2']] },
        { suffix: '_GPU', resources: { VGPU: 1 } },
      ],
      groupPolicy: 'isolate',
    });
    const flavor = flavorFromPlacementRequest(request);
    expect(flavor).toMatchObject({ name: 'placement-request', vcpus: 0, memoryMb: 0, diskGb: 0 });
    const spec = specFromPlacementRequest(request);
    expect(parseFlavor(flavor, { keys: [] }).groups).toEqual(spec.groups);
    const bySuffix = (groups: RequestGroup[]) => Object.fromEntries(groups.map((g) => [g.suffix, g]));
    expect(bySuffix(spec.groups)).toEqual(bySuffix(request.groups));
    expect(spec.groupPolicy).toBe('isolate');
  });

  it.each([
    ['any-of traits', { groups: [{ resources: { VCPU: 1 }, anyOfTraits: [['A', 'B']] }] }, /anyOfTraits/],
    ['in_tree', { groups: [{ resources: { VCPU: 1 }, inTree: '11111111-2222-4333-8444-555555555555' }] }, /inTree/],
    ['same_subtree', { groups: [{}, { suffix: '1', resources: { VCPU: 1 } }, { suffix: '2', requiredTraits: ['T'] }], groupPolicy: 'none', sameSubtree: [['1', '2']] }, /sameSubtree/],
    ['root_required', { groups: [{ resources: { VCPU: 1 } }], rootRequiredTraits: ['T'] }, /rootRequiredTraits/],
  ])('refuses to record %s on an instance, naming the field', (_name, input, message) => {
    expect(() => specFromPlacementRequest(checkPlacementRequest(input))).toThrow(message);
  });
});
