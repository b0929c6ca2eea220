; Remind the customers of every invoice over 100.00
section .data
    limit dq 100.0
    sent  dd 0
section .bss
    ids resd 3
section .text
_start:
    call list_invoices
    pop dword [ids]
    pop dword [ids + 4]
    pop dword [ids + 8]
    xor esi, esi
.check:
    push dword [ids + esi*4]
    call get_invoice_total
    movq xmm0, rax
    ucomisd xmm0, qword [limit]
    jbe .skip
    push dword [ids + esi*4]
    call send_reminder
    inc dword [sent]
.skip:
    inc esi
    cmp esi, 3
    jne .check
    hlt
